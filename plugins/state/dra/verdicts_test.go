package dra

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"
)

// A class's verdict on a slice's devices is kept while neither changes,
// and evaluated again when either does; objects that did not come from an
// apiserver are never kept.
func TestDeviceMatchesKeepsVerdictsWhileNothingChanges(t *testing.T) {
	r := NewReader(nil, nil, structured.Features{})
	slice := func(version string, models ...string) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "node-a", ResourceVersion: version}, Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com"}}
		for _, m := range models {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: "gpu-" + m, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To(m)}}})
		}
		return s
	}
	class := func(version, model string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "big", ResourceVersion: version}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "` + model + `"`}}},
		}}
	}
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		class *resourceapi.DeviceClass
		slice *resourceapi.ResourceSlice
		want  []bool
	}{
		{"first evaluation", class("1", "h100"), slice("1", "h100", "a100"), []bool{true, false}},
		{"the same objects, the kept verdict", class("1", "h100"), slice("1", "h100", "a100"), []bool{true, false}},
		{"the slice changed", class("1", "h100"), slice("2", "a100", "h100", "h100"), []bool{false, true, true}},
		{"the class changed", class("2", "a100"), slice("2", "a100", "h100", "h100"), []bool{true, false, false}},
		// An apiserver changes the version with the object: the verdict is
		// the one kept, not evaluated again.
		{"kept by version", class("2", "a100"), slice("2", "h100", "a100", "a100"), []bool{true, false, false}},
		{"not from an apiserver, same versions as before but other devices", class("", "a100"), slice("", "h100"), []bool{false}},
		{"a compiled selector that does not match", class("3", "b200"), slice("2", "a100", "h100", "h100"), []bool{false, false, false}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := r.deviceMatches(ctx, c.class, c.slice)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
	bad := class("4", "x")
	bad.Spec.Selectors[0].CEL.Expression = "device.nonsense("
	_, err := r.deviceMatches(ctx, bad, slice("2", "a100"))
	require.ErrorContains(t, err, "DeviceClass big: selector")

	r.forgetVerdicts(nil, []*resourceapi.DeviceClass{class("1", "h100")})
	require.Empty(t, r.verdicts, "verdicts of a slice that no longer exists are dropped")
}
