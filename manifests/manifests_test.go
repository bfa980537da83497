package manifests

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// WithReservation turns Gang's reservation on in every profile of a
// shipped configuration, and refuses a configuration whose Gang args
// do not turn it off as shipped.
func TestWithReservation(t *testing.T) {
	for _, name := range []string{"scheduler-config.yaml", "scheduler-config-replace-default.yaml"} {
		t.Run(name, func(t *testing.T) {
			shipped, err := File(name)
			require.NoError(t, err)
			on, err := WithReservation(shipped, 2)
			require.NoError(t, err)
			assert.Equal(t, strings.Count(string(shipped), "maxGangs: 0"), strings.Count(string(on), "maxGangs: 2"), "every profile's")
			assert.NotContains(t, string(on), "maxGangs: 0")
			_, err = WithReservation(on, 1)
			assert.ErrorContains(t, err, "maxGangs: 0", "already on: nothing to turn on")
		})
	}
}
