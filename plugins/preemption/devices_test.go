package preemption

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
)

// A single pod's plan on a node counts DRA devices: the node's free count
// plus what each victim there gives back — the devices of its allocated
// claims that no pod outside its unit uses. One node of 8 devices, all
// allocated to 8 pods of one device each, one of those claims shared with
// a pod that stays: a pod asking for 4 devices needs 4 victims whose
// claims are their own.
func TestRoomOnNodeCountsDevicesVictimsGiveBack(t *testing.T) {
	const key = corev1.ResourceName("example.com/gpu")
	gpu := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To(string(key))}}
	dra := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu}}
	store := state.NewStatic(nil, nil).WithDevices(devices.NewReader(dra, nil, structured.Features{}))

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	node.Status.Allocatable = capacity.Resources{corev1.ResourceCPU: 64000, corev1.ResourceMemory: 256 << 30, corev1.ResourcePods: 110}.List()
	var victims []*unit
	w := &world{store: store, byName: map[string]fwk.NodeInfo{}}
	var pods []*corev1.Pod
	for i := range 8 {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("v%d", i), UID: types.UID(fmt.Sprintf("v%d", i))}}
		pod.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 1 << 30}.List()}}}
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(pod.Name)}}
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: pod.Name},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu"}}}}}}
		claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: "gpu.example.com", Pool: "n", Device: fmt.Sprintf("gpu-%d", i)}}}}
		claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
		if i == 0 {
			// Shared with a pod that is no victim: evicting v0 frees nothing.
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "keeper", UID: "keeper"})
		}
		dra.Claims = append(dra.Claims, claim)
		pods = append(pods, pod)
		info, err := framework.NewPodInfo(pod)
		assert.NoError(t, err)
		victims = append(victims, &unit{members: []member{{info: info, node: "n"}}, w: w})
	}
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(node)
	w.byName["n"] = ni

	asking := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "p"}}
	asking.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 1 << 30}.List()}}}
	who := &preemptor{members: []*corev1.Pod{asking}, demand: map[types.UID]capacity.Resources{"p": {key: 4}},
		catalog: store.Devices().Catalog(), deviceKeys: []corev1.ResourceName{key},
		freeDevices: func(*corev1.Node) capacity.Resources { return capacity.Resources{key: 0} }}
	w.who = who

	room := w.roomOnNode(who, ni)
	assert.False(t, room(victims[:4]), "v0's claim stays allocated for its other user: v0…v3 free 3 devices")
	assert.True(t, room(victims[:5]), "v0…v4 free 4")
	assert.True(t, room(victims[1:5]), "v1…v4 free 4")
	assert.False(t, room(victims[1:4]), "v1…v3 free 3")
}
