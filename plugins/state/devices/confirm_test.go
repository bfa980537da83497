package devices_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

// domainSlice is node n1's 8 devices: model x for the first xs, y for the
// rest; gpu-0…3 in NVLink domain "a", gpu-4…7 in "b".
func domainSlice(xs int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "n1-gpus"},
		Spec:       resourceapi.ResourceSliceSpec{Driver: driver, Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1}, NodeName: ptr.To("n1")},
	}
	for i := range 8 {
		model, domain := "y", "a"
		if i < xs {
			model = "x"
		}
		if i >= 4 {
			domain = "b"
		}
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"model": {StringValue: ptr.To(model)}, "domain": {StringValue: ptr.To(domain)},
		}})
	}
	return s
}

// AllocatableOn: the allocator judges a plan on the state its victims
// leave. Node n1's NVLink domain a has gpu-0…3, b gpu-4…7; gpu-0, 1, 2,
// 4 and 5 are allocated. A claim of 4 devices in one domain fits only
// once b's two allocated devices are freed: freeing two of a's leaves a
// with three.
func TestAllocatableOn(t *testing.T) {
	sameDomain := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "same-domain"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests:    []resourceapi.DeviceRequest{exactly("gpu", 4)},
			Constraints: []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(driver + "/domain"))}},
		}}}}
	ids := func(devices ...int) []structured.DeviceID {
		var out []structured.DeviceID
		for _, d := range devices {
			out = append(out, structured.MakeDeviceID(driver, "n1", fmt.Sprintf("gpu-%d", d)))
		}
		return out
	}
	tests := []struct {
		name  string
		freed []structured.DeviceID
		want  bool
	}{
		{name: "nothing freed: no domain has 4 free", want: false},
		{name: "two of a's freed: a has 3", freed: ids(0, 1), want: false},
		{name: "b's two freed: b has 4", freed: ids(4, 5), want: true},
		{name: "a device not allocated freed changes nothing", freed: ids(7), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fakeDRA := &devicestest.DRA{
				Classes:   []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", "")},
				Slices:    []*resourceapi.ResourceSlice{domainSlice(0)},
				Allocated: sets.New(ids(0, 1, 2, 4, 5)...),
			}
			pod := podWithClaims("m0", byTemplate("gpus", "same-domain"))
			pod.UID = "m0"
			catalog := dra.NewReader(fakeDRA, templates(sameDomain), structured.Features{}).View(context.Background(), []*corev1.Pod{pod}).Catalog()
			_, err := catalog.Demand(pod)
			require.NoError(t, err)
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
			_, err = catalog.CountOn(node, []corev1.ResourceName{"example.com/gpu"})
			require.NoError(t, err)
			assert.True(t, catalog.NeedsAllocator("n1"), "a matchAttribute constraint is beyond a count")
			got, err := catalog.AllocatableOn(context.Background(), node, []*corev1.Pod{pod}, tc.freed)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// Hold makes the allocator see the claims of other placing gangs' members
// planned on a node as allocated first: a plan there gets only what they
// leave. Node n1 has 8 devices; another gang's member planned there takes
// 4 by its template.
func TestHoldPlannedClaims(t *testing.T) {
	four := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "four"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{exactly("gpu", 4)}}}}}
	five := four.DeepCopy()
	five.Name, five.Spec.Spec.Devices.Requests[0].Exactly.Count = "five", 5
	member := func(name, template string) *corev1.Pod {
		pod := podWithClaims(name, byTemplate("gpus", template))
		pod.UID = types.UID(name)
		return pod
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	tests := []struct {
		name    string
		planned map[string][]*corev1.Pod
		asks    string
		want    bool
	}{
		{name: "nothing planned: five of eight fit", asks: "five", want: true},
		{name: "four planned for another gang: five do not fit", planned: map[string][]*corev1.Pod{"n1": {member("other", "four")}}, asks: "five", want: false},
		{name: "four planned for another gang: four fit beside them", planned: map[string][]*corev1.Pod{"n1": {member("other", "four")}}, asks: "four", want: true},
		{name: "planned on another node: five fit", planned: map[string][]*corev1.Pod{"n2": {member("other", "four")}}, asks: "five", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", "")}, Slices: []*resourceapi.ResourceSlice{domainSlice(0)}, Allocated: sets.New[structured.DeviceID]()}
			mine := member("mine", tt.asks)
			read := []*corev1.Pod{mine}
			for _, pods := range tt.planned {
				read = append(read, pods...)
			}
			catalog := dra.NewReader(fakeDRA, templates(four, five), structured.Features{}).View(context.Background(), read).Catalog()
			_, err := catalog.Demand(mine)
			require.NoError(t, err)
			require.NoError(t, catalog.Hold(tt.planned))
			ledger, err := catalog.Ledger(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tt.want, ledger.Place([]uint64{1}, mine, node))
			assert.Zero(t, fakeDRA.Allocated.Len(), "the scheduler's allocated state is left as it was")
		})
	}
}
