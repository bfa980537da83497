package capacity

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The units rule: cpu in millicores, the rest in base units, both ways.
func TestUnits(t *testing.T) {
	const gpu corev1.ResourceName = "nvidia.com/gpu"
	tests := []struct {
		name       corev1.ResourceName
		quantity   string
		amount     int64
		formatted  string
		apiUnits   float64
		fractional float64 // an average in Resources' units
		wantFrac   string
	}{
		{name: corev1.ResourceCPU, quantity: "3500m", amount: 3500, formatted: "3500m", apiUnits: 3.5, fractional: 333.3333, wantFrac: "333333u"},
		{name: corev1.ResourceCPU, quantity: "16", amount: 16000, formatted: "16", apiUnits: 16, fractional: 1000, wantFrac: "1"},
		{name: corev1.ResourceMemory, quantity: "16Gi", amount: 16 << 30, formatted: "16Gi", apiUnits: 16 << 30, fractional: 1024.4, wantFrac: "1Ki"},
		{name: corev1.ResourceEphemeralStorage, quantity: "1Gi", amount: 1 << 30, formatted: "1Gi", apiUnits: 1 << 30, fractional: 1 << 30, wantFrac: "1Gi"},
		{name: gpu, quantity: "8", amount: 8, formatted: "8", apiUnits: 8, fractional: 1.0 / 3, wantFrac: "333333u"},
	}
	for _, tt := range tests {
		t.Run(string(tt.name)+" "+tt.quantity, func(t *testing.T) {
			q := resource.MustParse(tt.quantity)
			assert.Equal(t, tt.amount, ResourcesOf(corev1.ResourceList{tt.name: q})[tt.name])
			assert.Equal(t, tt.formatted, Format(tt.name, tt.amount))
			back := Resources{tt.name: tt.amount}.List()[tt.name]
			assert.Zero(t, q.Cmp(back), "%s round trip: %s", tt.quantity, back.String())
			assert.InDelta(t, tt.apiUnits, InAPIUnits(tt.name, float64(tt.amount)), 1e-9)
			assert.InDelta(t, float64(tt.amount), FromAPIUnits(tt.name, tt.apiUnits), 1e-9)
			got := FractionalQuantity(tt.name, tt.fractional)
			if assert.NotNil(t, got) {
				assert.Equal(t, tt.wantFrac, got.String())
			}
		})
	}
	assert.Nil(t, FractionalQuantity(gpu, 0), "zero is no quantity")
}
