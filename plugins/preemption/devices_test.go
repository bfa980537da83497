package preemption

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
	policylisters "k8s.io/client-go/listers/policy/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices/devicestest"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
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
	// h100 is a narrower class over the same devices, all of model h100.
	h100 := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "h100"}, Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
		CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "h100"`}}}}}
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu, h100}, Slices: []*resourceapi.ResourceSlice{nodeSlice("n", 8)}}
	store := state.WithDevices(state.NewStatic(nil, nil), dra.NewReader(fakeDRA, nil, structured.Features{}))

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	node.Status.Allocatable = capacity.Resources{corev1.ResourceCPU: 64000, corev1.ResourceMemory: 256 << 30, corev1.ResourcePods: 110}.List()
	var victims []*unit
	w := &world{store: readState(store), byName: map[string]fwk.NodeInfo{}}
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
		fakeDRA.Claims = append(fakeDRA.Claims, claim)
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
		devices: store.Devices().View(context.Background(), []*corev1.Pod{asking}, key), deviceKeys: []corev1.ResourceName{key},
		freeDevices: func(*corev1.Node) capacity.Resources { return capacity.Resources{key: 0} }}
	w.who = who

	room := w.roomOnNode(who, ni)
	assert.False(t, room(victims[:4]), "v0's claim stays allocated for its other user: v0…v3 free 3 devices")
	assert.True(t, room(victims[:5]), "v0…v4 free 4")
	assert.True(t, room(victims[1:5]), "v1…v4 free 4")
	assert.False(t, room(victims[1:4]), "v1…v3 free 3")

	// A preemptor asking by the narrower class: the victims' devices,
	// claimed by class gpu, are h100s and free for it as much.
	const h100Key = corev1.ResourceName("deviceclass.resource.kubernetes.io/h100")
	byModel := &preemptor{members: []*corev1.Pod{asking}, demand: map[types.UID]capacity.Resources{"p": {h100Key: 4}},
		devices: store.Devices().View(context.Background(), []*corev1.Pod{asking}, h100Key), deviceKeys: []corev1.ResourceName{h100Key},
		freeDevices: func(*corev1.Node) capacity.Resources { return capacity.Resources{h100Key: 0} }}
	w.who = byModel
	for i, v := range victims {
		// Units count what they give back once, for the preemptor surveyed.
		victims[i] = &unit{members: v.members, w: w}
	}
	room = w.roomOnNode(byModel, ni)
	assert.True(t, room(victims[1:5]), "v1…v4 free 4 h100s, whichever class they were claimed by")
	assert.False(t, room(victims[1:4]), "v1…v3 free 3 h100s")
}

// nodeSlice publishes n devices gpu-0… of model h100 on node, in a pool
// named after it.
func nodeSlice(node string, n int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node}, Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}, NodeName: ptr.To(node)}}
	for i := 0; i < n; i++ {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"model": {StringValue: ptr.To("h100")}}})
	}
	return s
}

// A gang confined to one rack that asks for DRA devices plans each rack
// on its nodes' free devices and what the victims there give back. Racks
// r1 and r2 have two nodes of 8 devices each; pods of low priority hold
// 4 devices each by their own claims: both r1 nodes full, r2-0 full,
// r2-1 free. A gang of 2 members × 8 devices takes r2, evicting the two
// pods on r2-0; cpu alone would evict nothing and never free a device.
func TestPlanGangInOneDomainCountsDevices(t *testing.T) {
	const key = corev1.ResourceName("example.com/gpu")
	gpu := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To(string(key))}}
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu}}
	rackOf := map[string]string{"r1-0": "r1", "r1-1": "r1", "r2-0": "r2", "r2-1": "r2"}
	for node := range rackOf {
		fakeDRA.Slices = append(fakeDRA.Slices, nodeSlice(node, 8))
	}
	holders := map[string][]string{"r1-0": {"low-a", "low-b"}, "r1-1": {"low-c", "low-d"}, "r2-0": {"low-e", "low-f"}}
	var pods []*corev1.Pod
	for node, names := range holders {
		for k, name := range names {
			pod := st.MakePod().Namespace("ns").Name(name).UID(name).Priority(10).Node(node).
				Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}).Obj()
			pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(name)}}
			claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
				Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: 4}}}}}}
			claim.Status.Allocation = &resourceapi.AllocationResult{}
			for d := range 4 {
				claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results,
					resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: "gpu.example.com", Pool: node, Device: fmt.Sprintf("gpu-%d", 4*k+d)})
			}
			claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: pod.UID}}
			fakeDRA.Claims = append(fakeDRA.Claims, claim)
			pods = append(pods, pod)
		}
	}
	var nodes []fwk.NodeInfo
	for _, name := range []string{"r1-0", "r1-1", "r2-0", "r2-1"} {
		var on []*corev1.Pod
		for _, p := range pods {
			if p.Spec.NodeName == name {
				on = append(on, p)
			}
		}
		ni := framework.NewNodeInfo(on...)
		ni.SetNode(st.MakeNode().Name(name).Label(rackLabel, rackOf[name]).
			Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "64", corev1.ResourceMemory: "256Gi", corev1.ResourcePods: "110"}).Obj())
		nodes = append(nodes, ni)
	}
	store := state.WithDevices(state.NewStatic(nil, pods), dra.NewReader(fakeDRA, nil, structured.Features{}))
	p := wired(&Preemption{
		handle: passingHandle{newSurveyHandle(t, map[types.UID]bool{})}, store: readState(store),
		pdbs: policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	})
	var members []*corev1.Pod
	demand := map[types.UID]capacity.Resources{}
	for i := range 2 {
		m := st.MakePod().Namespace("ns").Name(fmt.Sprintf("g-%d", i)).UID(fmt.Sprintf("g-%d", i)).Priority(1000).
			Label(schedv1alpha1.PodGroupLabel, "g").Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}).Obj()
		// Each member's own claim, not allocated yet: 8 devices.
		m.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(m.Name)}}
		fakeDRA.Claims = append(fakeDRA.Claims, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: m.Name},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 8}}}}}})
		members = append(members, m)
		demand[m.UID] = capacity.Resources{key: 8}
	}
	request := capacity.Request(members[0])
	request.Add(demand[members[0].UID])
	free := map[string]int64{"r2-1": 8}
	who := &preemptor{pod: members[0], members: members, priority: 1000, request: request,
		group: state.GroupKey{Namespace: "ns", Name: "g"}, inGroup: true, what: state.Workload{Kind: "gang", Namespace: "ns", Name: "ns/g"}, topology: inOneDomain(rackLabel, nil),
		devices: store.Devices().View(context.Background(), members, key), deviceKeys: []corev1.ResourceName{key}, demand: demand,
		freeDevices: func(n *corev1.Node) capacity.Resources { return capacity.Resources{key: free[n.Name]} }}
	ctx := context.Background()
	w, err := p.survey(ctx, who, nodes, false)
	require.NoError(t, err)

	pl, reason := p.newSearch(ctx, framework.NewCycleState(), who, w).planGangInOneDomain()
	require.NotNil(t, pl, reason)
	assert.Equal(t, []string{"low-e", "low-f"}, names(pl))
	require.Len(t, pl.placement, 2)
	for uid, node := range pl.placement {
		assert.Equal(t, "r2", rackOf[node], "member %s on %s", uid, node)
	}
}

// Where a count of devices cannot judge the preemptor's claims, the
// allocator confirms the plan on the devices its victims free. One node,
// NVLink domain a = gpu-0…3 and b = gpu-4…7; v1 (the cheapest) holds
// gpu-0 and 1, v2 gpu-4 and 5, v3 gpu-2. A pod asking for 4 devices in
// one domain: by count, evicting v1 frees enough (5 free); the allocator
// finds a left with 3, so the confirmed plan evicts v2 instead.
func TestPlanConfirmsClaimsWithTheAllocator(t *testing.T) {
	const key = corev1.ResourceName("example.com/gpu")
	gpu := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To(string(key))}}
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1}, NodeName: ptr.To("n1")}}
	for i := range 8 {
		domain := "a"
		if i >= 4 {
			domain = "b"
		}
		slice.Spec.Devices = append(slice.Spec.Devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"domain": {StringValue: ptr.To(domain)}}})
	}
	fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu}, Slices: []*resourceapi.ResourceSlice{slice}, Allocated: sets.New[structured.DeviceID]()}
	var pods []*corev1.Pod
	for _, v := range []struct {
		name     string
		priority int32
		devices  []int
	}{{"v1", 10, []int{0, 1}}, {"v2", 20, []int{4, 5}}, {"v3", 30, []int{2}}} {
		pod := st.MakePod().Namespace("ns").Name(v.name).UID(v.name).Priority(v.priority).Node("n1").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}).Obj()
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(v.name)}}
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: v.name},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: int64(len(v.devices))}}}}}}
		claim.Status.Allocation = &resourceapi.AllocationResult{}
		for _, d := range v.devices {
			claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results,
				resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: "gpu.example.com", Pool: "n1", Device: fmt.Sprintf("gpu-%d", d)})
			fakeDRA.Allocated.Insert(structured.MakeDeviceID("gpu.example.com", "n1", fmt.Sprintf("gpu-%d", d)))
		}
		claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: v.name, UID: pod.UID}}
		fakeDRA.Claims = append(fakeDRA.Claims, claim)
		pods = append(pods, pod)
	}
	node := framework.NewNodeInfo(pods...)
	node.SetNode(st.MakeNode().Name("n1").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "64", corev1.ResourceMemory: "256Gi", corev1.ResourcePods: "110"}).Obj())

	sameDomain := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "same-domain"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests:    []resourceapi.DeviceRequest{{Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4}}},
			Constraints: []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("gpu.example.com/domain"))}},
		}}}}
	templates := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, templates.Add(sameDomain))
	store := state.WithDevices(state.NewStatic(nil, pods), dra.NewReader(fakeDRA, resourcelisters.NewResourceClaimTemplateLister(templates), structured.Features{}))
	p := wired(&Preemption{
		handle: passingHandle{newSurveyHandle(t, map[types.UID]bool{})}, store: readState(store),
		pdbs: policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	})
	asking := st.MakePod().Namespace("ns").Name("p").UID("p").Priority(1000).
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}).Obj()
	asking.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("same-domain")}}
	who := &preemptor{pod: asking, members: []*corev1.Pod{asking}, priority: 1000, request: capacity.Request(asking), what: state.Workload{Kind: "pod", Namespace: "ns", Name: "ns/p"}}
	ctx := context.Background()
	require.Empty(t, who.countDevices(ctx, p.store.Devices(), []fwk.NodeInfo{node}))
	w, err := p.survey(ctx, who, []fwk.NodeInfo{node}, true)
	require.NoError(t, err)

	byCount := w.planByResources(who, node)
	require.NotNil(t, byCount)
	assert.Equal(t, []string{"v1"}, names(byCount.plan), "by count, the cheapest victim frees enough devices")
	confirmed := p.newSearch(ctx, framework.NewCycleState(), who, w).confirm(byCount)
	require.NotNil(t, confirmed)
	assert.Equal(t, []string{"v2"}, names(confirmed.plan), "the allocator needs domain b freed")
	assert.Equal(t, "n1", confirmed.plan.placement["p"])
}
