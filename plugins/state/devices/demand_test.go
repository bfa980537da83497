package devices_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/devices"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

func TestDemand(t *testing.T) {
	gpu, plain := class("gpu", "example.com/gpu", ""), class("plain", "", "")
	template := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "two-gpus"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{exactly("gpu", 2)}}}}}
	generated := podWithClaims("generated", byTemplate("g", "two-gpus"))
	generated.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "g", ResourceClaimName: ptr.To("generated-g")}}
	all := exactly("gpu", 0)
	all.Exactly.AllocationMode = resourceapi.DeviceAllocationModeAll
	admin := exactly("gpu", 4)
	admin.Exactly.AdminAccess = ptr.To(true)
	prioritized := resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "big", DeviceClassName: "plain", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 3},
		{Name: "small", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
	}}
	prioritizedOneClass := resourceapi.DeviceRequest{Name: "r", FirstAvailable: []resourceapi.DeviceSubRequest{
		{Name: "four", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4},
		{Name: "two", DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 2},
	}}
	fakeDRA := &devicestest.DRA{
		Classes: []*resourceapi.DeviceClass{gpu, plain},
		Claims: []*resourceapi.ResourceClaim{
			claimOf("one", false, exactly("gpu", 1)),
			claimOf("held", true, exactly("gpu", 1)),
			claimOf("generated-g", false, exactly("gpu", 5)),
			claimOf("all", false, all),
			claimOf("admin", false, admin),
			claimOf("prioritized", false, prioritized),
			claimOf("prioritized-one-class", false, prioritizedOneClass),
			claimOf("unknown-class", false, exactly("nope", 1)),
		},
	}

	tests := []struct {
		name    string
		pods    []*corev1.Pod
		want    []capacity.Resources
		wantErr string
	}{
		{name: "no claims: nothing", pods: []*corev1.Pod{podWithClaims("p")}, want: []capacity.Resources{nil}},
		{name: "a claim of a class with an extended resource counts under it", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "one"))}, want: []capacity.Resources{{"example.com/gpu": 1}}},
		{name: "an allocated claim takes nothing more", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "held"))}, want: []capacity.Resources{{}}},
		{name: "a claim shared by two pods counts once", pods: []*corev1.Pod{podWithClaims("a", byClaim("c", "one")), podWithClaims("b", byClaim("c", "one"))}, want: []capacity.Resources{{"example.com/gpu": 1}, {}}},
		{name: "a template not generated yet counts its spec", pods: []*corev1.Pod{podWithClaims("p", byTemplate("g", "two-gpus"))}, want: []capacity.Resources{{"example.com/gpu": 2}}},
		{name: "two pods of one template each count theirs", pods: []*corev1.Pod{podWithClaims("a", byTemplate("g", "two-gpus")), podWithClaims("b", byTemplate("g", "two-gpus"))}, want: []capacity.Resources{{"example.com/gpu": 2}, {"example.com/gpu": 2}}},
		{name: "a generated claim is read, not its template", pods: []*corev1.Pod{generated}, want: []capacity.Resources{{"example.com/gpu": 5}}},
		{name: "allocationMode All takes at least one", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "all"))}, want: []capacity.Resources{{"example.com/gpu": 1}}},
		{name: "adminAccess takes nothing", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "admin"))}, want: []capacity.Resources{{}}},
		{name: "a prioritized list over two classes counts nothing: the allocator alone can rule a node out", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "prioritized"))}, want: []capacity.Resources{{}}},
		{name: "a prioritized list over one class counts its smallest alternative", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "prioritized-one-class"))}, want: []capacity.Resources{{"example.com/gpu": 2}}},
		{name: "a missing template is named", pods: []*corev1.Pod{podWithClaims("p", byTemplate("g", "missing"))}, wantErr: "ResourceClaimTemplate ns/missing"},
		{name: "a missing claim is named", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "missing"))}, wantErr: "ResourceClaim missing"},
		{name: "a missing class is named", pods: []*corev1.Pod{podWithClaims("p", byClaim("c", "unknown-class"))}, wantErr: "DeviceClass nope not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			catalog := dra.NewReader(fakeDRA, templates(template), structured.Features{}).View(context.Background(), tc.pods).Catalog()
			for i, pod := range tc.pods {
				got, err := catalog.Demand(pod)
				if tc.wantErr != "" {
					require.ErrorContains(t, err, tc.wantErr)
					return
				}
				require.NoError(t, err)
				assert.Equal(t, tc.want[i], got, "pod %s", pod.Name)
			}
		})
	}
}

// A claim two pods of one check reference while it is not allocated is
// named with its pods: the scheduler allocates it for one pod at a time,
// so members placed together cannot share it. Allocated, it is no one's
// demand, and shared is fine.
func TestSharedUnallocated(t *testing.T) {
	for _, tc := range []struct {
		name      string
		allocated bool
		wantClaim string
		wantPods  []string
	}{
		{name: "not allocated", wantClaim: "ns/shared", wantPods: []string{"a", "b"}},
		{name: "allocated", allocated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{class("gpu", "example.com/gpu", "")}, Claims: []*resourceapi.ResourceClaim{claimOf("shared", tc.allocated, exactly("gpu", 1))}}
			pods := []*corev1.Pod{podWithClaims("a", byClaim("c", "shared")), podWithClaims("b", byClaim("c", "shared"))}
			catalog := dra.NewReader(fakeDRA, nil, structured.Features{}).View(context.Background(), pods).Catalog()
			total := capacity.Resources{}
			for _, pod := range pods {
				demand, err := catalog.Demand(pod)
				require.NoError(t, err)
				total.Add(demand)
			}
			claim, users := catalog.SharedUnallocated()
			assert.Equal(t, tc.wantClaim, claim)
			assert.Equal(t, tc.wantPods, users)
			if tc.allocated {
				assert.Zero(t, total["example.com/gpu"], "an allocated claim takes nothing more")
			} else {
				assert.Equal(t, int64(1), total["example.com/gpu"], "counted once, for the first pod")
			}
		})
	}
}

// A pod uses a claim its reference names, the claim its status says was
// generated from its template, or, before its status says so, a claim it
// controls; never a claim of another namespace, nor one it merely owns
// without referring to any claim.
func TestUses(t *testing.T) {
	pod := podWithClaims("worker", byClaim("shared", "team-gpus"), byTemplate("own", "one-gpu"))
	pod.UID = "worker"
	generated := podWithClaims("worker", byTemplate("own", "one-gpu"))
	generated.UID = "worker"
	generated.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "own", ResourceClaimName: ptr.To("worker-own-x7k2")}}
	noRefs := podWithClaims("leader")
	noRefs.UID = "leader"
	controlledBy := func(name string, uid types.UID) *resourceapi.ResourceClaim {
		c := claimOf(name, false, exactly("gpu", 1))
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: string(uid), UID: uid, Controller: ptr.To(true)}}
		return c
	}
	elsewhere := claimOf("team-gpus", false)
	elsewhere.Namespace = "other"
	tests := []struct {
		name  string
		pod   *corev1.Pod
		claim *resourceapi.ResourceClaim
		want  bool
	}{
		{"named by its reference", pod, claimOf("team-gpus", false), true},
		{"of another namespace", pod, elsewhere, false},
		{"generated, as its status records", generated, claimOf("worker-own-x7k2", false), true},
		{"generated, before its status records it: controlled by the pod", pod, controlledBy("worker-own-abcd", "worker"), true},
		{"controlled by another pod", pod, controlledBy("w1-own-abcd", "w1"), false},
		{"controlled by a pod that refers to no claim", noRefs, controlledBy("leader-x", "leader"), false},
		{"another claim", pod, claimOf("other", false), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, devices.Uses(tc.pod, tc.claim))
		})
	}
}
