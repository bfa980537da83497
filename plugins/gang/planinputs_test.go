package gang

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
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

// The quorum check places members node by node: free capacity that adds up
// but is scattered in fragments too small for a member does not pass
// (scheduler-plugins #429).
func TestQuorumCheckIsPlacementAware(t *testing.T) {
	members := []*corev1.Pod{cpuMember("m0", "4"), cpuMember("m1", "4")}
	pg := podGroup("g", t0, 2)
	g := &Gang{store: state.NewStatic([]*schedv1alpha1.PodGroup{pg}, members)}
	filler := func(n string) *corev1.Pod {
		return st.MakePod().Name(n).UID(n).Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1"}).Obj()
	}
	fragmented := []fwk.NodeInfo{nodeInfo("a", "4", filler("fa")), nodeInfo("b", "4", filler("fb")), nodeInfo("c", "4", filler("fc"))}
	roomy := []fwk.NodeInfo{nodeInfo("a", "4"), nodeInfo("b", "4", filler("fb")), nodeInfo("c", "8")}

	var plan []capacity.PlanSlot
	check := func(nodes []fwk.NodeInfo) (reason string) {
		g.store.Lock(func(locked *state.Locked) {
			out := g.quorumDoesNotFit(context.Background(), pg, readPlanInputs(locked, locked.Gang(state.GroupKey{Namespace: "ns", Name: "g"}), pg, nil, 0), false, nodes, nil)
			reason, plan = out.reason, out.plan
		})
		return reason
	}
	assert.Contains(t, check(fragmented), "0 of the 2 members needed for minMember 2 fit on the nodes' free capacity; "+
		"2 members have no node; the largest needs cpu 4: the most free on one node is cpu 3 on node a, 9 on all 3 nodes", "9 cpu free in 3-cpu pieces")
	assert.Empty(t, check(roomy))
	// The plan is where first fit put them: one on a, one on c.
	four := capacity.Resources{corev1.ResourceCPU: 4000}
	require.Len(t, plan, 2)
	for i, want := range []capacity.PlanSlot{{Node: "a", Members: 1, Held: four, Took: []int{0}}, {Node: "c", Members: 1, Held: four, Took: []int{1}}} {
		require.Len(t, plan[i].Pods, 1, "the slot names the member it was planned for")
		plan[i].Pods = nil
		assert.Equal(t, want, plan[i])
	}

	// Members already reserved do not need room again.
	g.store.Lock(func(locked *state.Locked) {
		locked.ReserveMember(locked.Gang(state.GroupKey{Namespace: "ns", Name: "g"}), members[0], "n0")
	})
	oneNode := []fwk.NodeInfo{nodeInfo("a", "4")}
	assert.Empty(t, check(oneNode))
}

// The quorum check counts devices allocated through DRA where nodes have
// none in allocatable: by extended resource a DeviceClass serves, or by
// claim template; per node, less what is allocated; and says which class
// is short and by how much.
func TestQuorumCheckCountsDRADevices(t *testing.T) {
	gpu := gpuClass()
	slice := gpuSlice
	byExtended := func(name string, n string) *corev1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, "g").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi", "example.com/gpu": n}).Obj()
	}
	byTemplate := func(name string) *corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, "g").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}).Obj()
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To("four")}}
		return p
	}
	byClaim := func(name, claim string) *corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, "g").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}).Obj()
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim)}}
		return p
	}
	oneGPU := resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
		Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}}}}
	sharedClaim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shared"}, Spec: resourceapi.ResourceClaimSpec{Devices: oneGPU}}
	allocatedClaim := sharedClaim.DeepCopy()
	allocatedClaim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
		Request: "gpus", Driver: "gpu.example.com", Pool: "a", Device: "d0"}}}}
	template := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "four"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 4}}}}}}}
	templates := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, templates.Add(template))
	nodes := []fwk.NodeInfo{nodeInfo("a", "64"), nodeInfo("b", "64")}
	// allNodes is a pool of n network-attached devices every node sees.
	allNodes := func(n int) *resourceapi.ResourceSlice {
		s := slice("net", n)
		s.Spec.NodeName, s.Spec.AllNodes = nil, ptr.To(true)
		return s
	}
	var allocatedOnA []structured.DeviceID
	for i := 0; i < 6; i++ {
		allocatedOnA = append(allocatedOnA, structured.MakeDeviceID("gpu.example.com", "a", fmt.Sprintf("d%d", i)))
	}

	tests := []struct {
		name      string
		members   []*corev1.Pod
		claims    []*resourceapi.ResourceClaim
		allocated []structured.DeviceID
		// slices replace the nodes' slices (a 8 devices, b 3) when set.
		slices []*resourceapi.ResourceSlice
		// wantReason: "" when the quorum fits; wantNot is not in it.
		wantReason string
		wantNot    string
		wantPlan   map[string]int
	}{
		{name: "extended resource: 4 × 2 devices fit on the node with 8",
			members:  []*corev1.Pod{byExtended("m0", "2"), byExtended("m1", "2"), byExtended("m2", "2"), byExtended("m3", "2")},
			wantPlan: map[string]int{"a": 4}},
		{name: "extended resource: 4 × 3 devices, 11 free, 3 fit",
			members:    []*corev1.Pod{byExtended("m0", "3"), byExtended("m1", "3"), byExtended("m2", "3"), byExtended("m3", "3")},
			wantReason: "needs 12 devices of class gpu.example.com: 11 free, at most 8 on one node"},
		{name: "claim template: 2 × 4 devices fit on a",
			members:  []*corev1.Pod{byTemplate("m0"), byTemplate("m1")},
			wantPlan: map[string]int{"a": 2}},
		{name: "claim template: allocated devices are not free",
			members: []*corev1.Pod{byTemplate("m0"), byTemplate("m1")}, allocated: allocatedOnA,
			wantReason: "needs 8 devices of class gpu.example.com: 5 free, at most 3 on one node"},
		{name: "claim template: allocated devices still exist, so more may free",
			members: []*corev1.Pod{byTemplate("m0"), byTemplate("m1")}, allocated: allocatedOnA,
			wantReason: "at most 3 on one node", wantNot: "in all"},
		{name: "claim shared by two members, not allocated: never placeable together",
			members: []*corev1.Pod{byClaim("m0", "shared"), byClaim("m1", "shared"), byTemplate("m2")}, claims: []*resourceapi.ResourceClaim{sharedClaim},
			wantReason: "gang ns/g waits: ResourceClaim ns/shared is shared by members m0, m1 and not allocated"},
		{name: "claim shared by two members, allocated already: they join it",
			members: []*corev1.Pod{byClaim("m0", "shared"), byClaim("m1", "shared")}, claims: []*resourceapi.ResourceClaim{allocatedClaim},
			wantPlan: map[string]int{"a": 2}},
		{name: "claim of one member only: allocated with it",
			members: []*corev1.Pod{byClaim("m0", "shared"), byTemplate("m1")}, claims: []*resourceapi.ResourceClaim{sharedClaim},
			wantPlan: map[string]int{"a": 2}},
		{name: "extended resource: more devices than the nodes have at all",
			members:    []*corev1.Pod{byExtended("m0", "4"), byExtended("m1", "4"), byExtended("m2", "4")},
			wantReason: "needs 12 devices of class gpu.example.com: 11 free, at most 8 on one node; the nodes have 11 in all, at most 8 on one node: it waits until more are published"},
		{name: "devices every node sees are one pool, not one per node",
			members: []*corev1.Pod{byExtended("m0", "2"), byExtended("m1", "2"), byExtended("m2", "2"), byExtended("m3", "2")}, slices: []*resourceapi.ResourceSlice{allNodes(6)},
			wantReason: "needs 8 devices of class gpu.example.com: 6 free, at most 6 on one node; the nodes have 6 in all, at most 6 on one node: it waits until more are published"},
		{name: "a pool every node sees holds what fits in it",
			members: []*corev1.Pod{byExtended("m0", "2"), byExtended("m1", "2"), byExtended("m2", "2")}, slices: []*resourceapi.ResourceSlice{allNodes(6)},
			wantPlan: map[string]int{"a": 3}},
		{name: "extended resource: one member needs more than any node has",
			members:    []*corev1.Pod{byExtended("m0", "9")},
			wantReason: "needs 9 devices of class gpu.example.com: 11 free, at most 8 on one node; the nodes have 11 in all, at most 8 on one node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pg := podGroup("g", t0, int32(len(tc.members)))
			slices := []*resourceapi.ResourceSlice{slice("a", 8), slice("b", 3)}
			if tc.slices != nil {
				slices = tc.slices
			}
			fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpu}, Slices: slices, Claims: tc.claims, Allocated: sets.New(tc.allocated...)}
			store := state.WithDevices(state.NewStatic([]*schedv1alpha1.PodGroup{pg}, tc.members),
				dra.NewReader(fakeDRA, resourcelisters.NewResourceClaimTemplateLister(templates), structured.Features{}))
			g := &Gang{store: store}
			var reason string
			var plan []capacity.PlanSlot
			store.Lock(func(locked *state.Locked) {
				out := g.quorumDoesNotFit(context.Background(), pg, readPlanInputs(locked, locked.Gang(state.GroupKey{Namespace: "ns", Name: "g"}), pg, nil, 0), false, nodes, nil)
				reason, plan = out.reason, out.plan
			})
			if tc.wantReason != "" {
				assert.Contains(t, reason, tc.wantReason)
				if tc.wantNot != "" {
					assert.NotContains(t, reason, tc.wantNot)
				}
				return
			}
			require.Empty(t, reason)
			got := map[string]int{}
			for _, slot := range plan {
				got[slot.Node] = slot.Members
			}
			assert.Equal(t, tc.wantPlan, got)
		})
	}
}

// Where a count of devices cannot judge the claims, the allocator that
// confirms the check sees the claims of other gangs' planned members as
// taken. Node a: NVLink domain a = d0…3, b = d4…7, all free. Gang "held"
// is placing, its member planned on a with a claim of 4 devices of
// domain a; gang "g" asks for one device of domain a. By count 4 of the
// 8 are left; the allocator, given the held claim, finds none in domain
// a: g waits. Without the other plan, g fits.
func TestQuorumCheckHandsOtherPlansToTheAllocator(t *testing.T) {
	slice := gpuSlice("a", 8)
	for i := range slice.Spec.Devices {
		domain := "a"
		if i >= 4 {
			domain = "b"
		}
		slice.Spec.Devices[i].Attributes = map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"domain": {StringValue: ptr.To(domain)}}
	}
	inDomainA := func(name string, count int64) *resourceapi.ResourceClaimTemplate {
		return &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
					Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].domain == "a"`}}}}}}}}}}
	}
	templates := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	require.NoError(t, templates.Add(inDomainA("four-in-a", 4)))
	require.NoError(t, templates.Add(inDomainA("one-in-a", 1)))
	member := func(group, name, template string) *corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, group).
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}).Obj()
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr.To(template)}}
		return p
	}
	heldMember, asking := member("held", "h0", "four-in-a"), member("g", "g0", "one-in-a")
	nodes := []fwk.NodeInfo{nodeInfo("a", "64")}

	for _, tc := range []struct {
		name       string
		otherPlan  bool
		wantReason string
	}{
		{name: "another gang's plan holds domain a", otherPlan: true, wantReason: "member g0: its device claims cannot be allocated on 1 node(s) with room for it by count"},
		{name: "no other plan", otherPlan: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups := []*schedv1alpha1.PodGroup{podGroup("held", t0, 1), podGroup("g", t0, 1)}
			fakeDRA := &devicestest.DRA{Classes: []*resourceapi.DeviceClass{gpuClass()}, Slices: []*resourceapi.ResourceSlice{slice}, Allocated: sets.New[structured.DeviceID]()}
			store := state.WithDevices(state.NewStatic(groups, []*corev1.Pod{heldMember, asking}),
				dra.NewReader(fakeDRA, resourcelisters.NewResourceClaimTemplateLister(templates), structured.Features{}))
			g := &Gang{store: store}
			var reason string
			store.Lock(func(locked *state.Locked) {
				if tc.otherPlan {
					held := capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: 1 << 30, "example.com/gpu": 4}
					locked.Attempts().StartPlacing(locked.Gang(state.GroupKey{Namespace: "ns", Name: "held"}),
						[]capacity.PlanSlot{{Node: "a", Members: 1, Held: held, Took: []int{0}, Pods: []*corev1.Pod{heldMember}}})
				}
				gang := locked.Gang(state.GroupKey{Namespace: "ns", Name: "g"})
				reason = g.quorumDoesNotFit(context.Background(), groups[1], readPlanInputs(locked, gang, groups[1], nil, 0), true, nodes, nil).reason
			})
			if tc.wantReason == "" {
				assert.Empty(t, reason)
				return
			}
			assert.Contains(t, reason, tc.wantReason)
		})
	}
}

// The quorum check runs without the store's lock, on what it read under
// it; its verdict is applied only if the gangs' accounting did not change
// meanwhile, else it is made again, at most maxQuorumChecks times.
func TestQuorumCheckRunsWithoutTheStoresLock(t *testing.T) {
	// Four nodes of 4 cpu; gang a (2 whole-node members) is placing; gang
	// b (3 whole-node members, a leader asking less memory than its
	// workers) fits only once a's plan holds nothing.
	nodes := []fwk.NodeInfo{nodeInfo("n0", "4"), nodeInfo("n1", "4"), nodeInfo("n2", "4"), nodeInfo("n3", "4")}
	aKey := state.GroupKey{Namespace: "ns", Name: "a"}
	for _, tc := range []struct {
		name string
		// during runs inside check number n (from 1), the lock free.
		during     func(locked *state.Locked, n int)
		wantChecks int
		wantCode   fwk.Code
		wantMsg    string
	}{
		{name: "nothing changes: one check, its verdict stands", during: func(*state.Locked, int) {},
			wantChecks: 1, wantCode: fwk.Unschedulable, wantMsg: "placing gang(s) ns/a hold the room its quorum needs"},
		{name: "the placing gang's attempt ends during the check: checked again, and it starts",
			during: func(locked *state.Locked, n int) {
				if n == 1 {
					locked.Attempts().FinishPlacing(locked.Gang(aKey))
				}
			},
			wantChecks: 2, wantCode: fwk.Success},
		{name: "the accounting changes during every check: refused, tried again shortly",
			during: func(locked *state.Locked, _ int) {
				a := locked.Gang(aKey)
				locked.UnreserveMember(a, "a-0")
				locked.ReserveMember(a, members("a", 1, "4")[0], "n0")
			},
			wantChecks: maxQuorumChecks, wantCode: fwk.Unschedulable, wantMsg: "changed while its quorum was checked, 3 times"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := members("a", 2, "4"), members("b", 3, "4")
			b[0].Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("512Mi")
			groups := []*schedv1alpha1.PodGroup{podGroup("a", t0, 2), podGroup("b", t0, 3)}
			g, h := testGang(t, groups, append(append([]*corev1.Pod{}, a...), b...))
			ctx := context.Background()
			_, status := g.PreFilter(ctx, framework.NewCycleState(), a[0], nodes)
			require.True(t, status.IsSuccess(), status.Message())

			checks := 0
			g.duringQuorumCheck = func() {
				checks++
				// The lock is free: another goroutine takes it at once.
				took := make(chan struct{})
				go g.store.Lock(func(locked *state.Locked) {
					tc.during(locked, checks)
					close(took)
				})
				select {
				case <-took:
				case <-time.After(5 * time.Second):
					t.Fatal("the store's lock is held during the quorum check")
				}
			}
			_, status = g.PreFilter(ctx, framework.NewCycleState(), b[1], nodes)
			assert.Equal(t, tc.wantChecks, checks)
			assert.Equal(t, tc.wantCode, status.Code(), status.Message())
			assert.Contains(t, status.Message(), tc.wantMsg)
			assert.Equal(t, tc.wantCode == fwk.Success, isPlacing(g, "b"))
			if tc.wantChecks == maxQuorumChecks {
				require.Eventually(t, func() bool { return h.activated["ns/b-1"] }, 5*time.Second, 50*time.Millisecond, "a gang refused for a changing accounting is tried again")
			}
		})
	}
}
