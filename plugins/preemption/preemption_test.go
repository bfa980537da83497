package preemption

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

// The extension points' contracts, each by table: what PreEnqueue holds
// back, what EventsToRegister lets in, and what PostFilter refuses before
// it searches for victims.

// evictionFixture is a plugin with one eviction in flight for a gang's
// leader and workers (victims: a cpu pod and a GPU pod), and a pods
// informer holding the pods named.
func evictionFixture(t *testing.T, informer ...string) (*Preemption, map[string]*corev1.Pod) {
	t.Helper()
	mk := func(name, group, node string, req map[corev1.ResourceName]string) *corev1.Pod {
		w := st.MakePod().Namespace("ns").Name(name).UID(name).Req(req)
		if group != "" {
			w = w.Label(schedv1alpha1.PodGroupLabel, group)
		}
		if node != "" {
			w = w.Node(node)
		}
		return w.Obj()
	}
	cpu := map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi"}
	gpu := map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "64Gi", "nvidia.com/gpu": "4"}
	pods := map[string]*corev1.Pod{
		"leader":     mk("leader", "train", "", cpu),
		"worker":     mk("worker", "train", "", gpu),
		"lone":       mk("lone", "", "", cpu),
		"victim-cpu": mk("victim-cpu", "", "n1", cpu),
		"victim-gpu": mk("victim-gpu", "", "n2", gpu),
		"bystander":  mk("bystander", "", "n3", cpu),
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, name := range informer {
		require.NoError(t, indexer.Add(pods[name]))
	}
	ref := func(name string) podRef {
		p := pods[name]
		return podRef{namespace: p.Namespace, name: p.Name, node: p.Spec.NodeName, uid: p.UID}
	}
	p := wired(&Preemption{pods: corelisters.NewPodLister(indexer), store: readState(state.NewStatic(nil, nil))}, map[string]*eviction{
		"gang/ns/train": {victims: []podRef{ref("victim-cpu"), ref("victim-gpu")}, members: []podRef{ref("leader"), ref("worker")}, started: time.Now()},
	})
	return p, pods
}

// PreEnqueue holds a preemptor's gang members back while their victims
// are still there, saying how many; others pass.
func TestPreEnqueue(t *testing.T) {
	tests := []struct {
		name     string
		informer []string
		pod      string
		wantHeld string // "" for admitted
	}{
		{name: "the leader, both victims still there", informer: []string{"victim-cpu", "victim-gpu"}, pod: "leader", wantHeld: "waiting for 2 pods evicted to make room for it to terminate"},
		{name: "a worker of another shape, one victim left", informer: []string{"victim-gpu"}, pod: "worker", wantHeld: "waiting for 1 pods evicted"},
		{name: "the victims gone: the gang is let in", pod: "leader"},
		{name: "a pod no eviction is for", informer: []string{"victim-cpu", "victim-gpu"}, pod: "lone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, pods := evictionFixture(t, tt.informer...)
			status := p.PreEnqueue(context.Background(), pods[tt.pod])
			if tt.wantHeld == "" {
				assert.True(t, status.IsSuccess(), "admitted: %v", status)
				return
			}
			assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
			assert.Contains(t, status.Message(), tt.wantHeld)
			assert.Equal(t, reasons.PreemptionPending, reasons.Of(status.Message()))
		})
	}
}

// EventsToRegister lets a held preemptor in on the deletion of one of its
// own victims only.
func TestEventsToRegister(t *testing.T) {
	p, pods := evictionFixture(t)
	events, err := p.EventsToRegister(context.Background())
	require.NoError(t, err)
	require.Len(t, events, 1)
	assert.Equal(t, fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, events[0].Event)
	hint := events[0].QueueingHintFn
	tests := []struct {
		name string
		pod  string
		gone interface{}
		want fwk.QueueingHint
	}{
		{name: "the leader's victim deleted", pod: "leader", gone: pods["victim-cpu"], want: fwk.Queue},
		{name: "the worker's gang's other victim deleted", pod: "worker", gone: pods["victim-gpu"], want: fwk.Queue},
		{name: "a bystander deleted: the leader still waits", pod: "leader", gone: pods["bystander"], want: fwk.QueueSkip},
		{name: "a pod waiting for no eviction: any deletion", pod: "lone", gone: pods["bystander"], want: fwk.Queue},
		{name: "not a pod: tried", pod: "leader", gone: "tombstone", want: fwk.Queue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := hint(klog.Background(), pods[tt.pod], tt.gone, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// PostFilter refuses, before any search, a pod that may not preempt, a
// gang not waiting for room, and a preemptor whose victims are still
// leaving; the last keeps its nomination, the others drop it.
func TestPostFilterRefusals(t *testing.T) {
	never := corev1.PreemptNever
	tests := []struct {
		name           string
		pod            func(map[string]*corev1.Pod) *corev1.Pod
		informer       []string
		wantMessage    string
		wantKeepsNomin bool
	}{
		{name: "preemptionPolicy Never", pod: func(p map[string]*corev1.Pod) *corev1.Pod {
			pod := p["lone"].DeepCopy()
			pod.Spec.PreemptionPolicy = &never
			return pod
		}, wantMessage: "not preempting: the pod's preemptionPolicy is Never", wantKeepsNomin: true},
		{name: "a gang member whose gang is not waiting for room", pod: func(p map[string]*corev1.Pod) *corev1.Pod { return p["worker"] },
			wantMessage: "not preempting: gang ns/train is not waiting for room"},
		{name: "a pod whose victims are still leaving keeps its nomination", pod: func(p map[string]*corev1.Pod) *corev1.Pod { return p["lone"] },
			informer: []string{"victim-cpu", "lone"}, wantMessage: "not preempting again: 1 victims evicted for pod ns/lone are still terminating", wantKeepsNomin: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, pods := evictionFixture(t, tt.informer...)
			p.evictions.inFlight["lone"] = &eviction{victims: []podRef{{namespace: "ns", name: "victim-cpu", node: "n1", uid: "victim-cpu"}}, started: time.Now()}
			pg := &schedv1alpha1.PodGroup{}
			pg.Namespace, pg.Name, pg.Spec.MinMember = "ns", "train", 2
			p.store = readState(state.NewStatic([]*schedv1alpha1.PodGroup{pg}, []*corev1.Pod{pods["leader"], pods["worker"]}))
			result, status := p.PostFilter(context.Background(), framework.NewCycleState(), tt.pod(pods), framework.NewDefaultNodeToStatus())
			assert.Equal(t, fwk.Unschedulable, status.Code())
			assert.Contains(t, status.Message(), tt.wantMessage)
			if tt.wantKeepsNomin {
				assert.Nil(t, result)
			} else {
				assert.Same(t, dropNomination, result)
			}
		})
	}
}

// A plan that evicts nothing says room is being freed only where pods
// terminate on the nodes it places on; elsewhere the preemptor fits now,
// so room is not what refused it (a gang whose minResources exceed the
// cluster was told terminating pods freed room where none terminated).
func TestNoVictimsNeeded(t *testing.T) {
	leaving := wholeNodePod("leaving", 0, "node-a")
	who := &preemptor{what: state.Workload{Kind: "gang", Namespace: "ns", Name: "ns/g"}}
	tests := []struct {
		name        string
		terminating map[string][]fwk.PodInfo
		placement   map[types.UID]string
		want        string
	}{{
		name:        "a pod terminates where a member goes",
		terminating: map[string][]fwk.PodInfo{"node-a": {mustPodInfo(t, leaving)}},
		placement:   map[types.UID]string{"m1": "node-b", "m2": "node-a"},
		want:        "not preempting: 1 terminating pods are freeing room for gang ns/g",
	}, {
		name:        "pods terminate only elsewhere",
		terminating: map[string][]fwk.PodInfo{"node-c": {mustPodInfo(t, leaving)}},
		placement:   map[types.UID]string{"m1": "node-a"},
		want:        "preemption cannot help: gang ns/g fits on the nodes without evicting anything, and preemption evicts only to place pods, not for a PodGroup's minResources or a queue's share",
	}, {
		name:      "nothing terminates",
		placement: map[types.UID]string{"m1": "node-a", "m2": "node-a"},
		want:      "preemption cannot help: gang ns/g fits on the nodes without evicting anything, and preemption evicts only to place pods, not for a PodGroup's minResources or a queue's share",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &world{terminating: tt.terminating}
			reason, freeing := noVictimsNeeded(who, &plan{placement: tt.placement}, w)
			assert.Equal(t, tt.want, reason)
			assert.Equal(t, strings.HasPrefix(tt.want, "not preempting"), freeing, "room is being freed: the nomination stands")
		})
	}
}

// PostFilter nominates the node it makes room on, leaves a nomination
// standing while pods terminating there free the room, and drops it when
// no eviction it may make helps: a nomination left so holds that room from
// every pod of no higher priority for as long as the pod waits. (The plan
// that evicts nothing because the room is there already, which drops it
// too, is TestNoVictimsNeeded's: freeing is false there.)
func TestPostFilterNomination(t *testing.T) {
	tests := []struct {
		name string
		// on n-0 and n-1 (8 cpu each): a pod of 7 cpu at priority 10 on
		// n-0; on n-1 one of 7 cpu, terminating or not, or none.
		terminating, n1Empty bool
		preemptor            *corev1.Pod
		wantCode             fwk.Code
		wantResult           *fwk.PostFilterResult
		// nominated: to a node of a victim (either has one).
		nominated bool
	}{
		{name: "victims make room", preemptor: wholeNodePod("urgent", 1000, ""),
			wantCode: fwk.Success, nominated: true},
		{name: "pods terminating free its room", terminating: true, preemptor: wholeNodePod("urgent", 5, ""),
			wantCode: fwk.Unschedulable, wantResult: nil},
		{name: "nothing it may evict makes room", n1Empty: true, preemptor: wholeNodePod("refused", 5, ""),
			wantCode: fwk.Unschedulable, wantResult: dropNomination},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			running := []*corev1.Pod{wholeNodePod("low", 10, "n-0")}
			if !tt.n1Empty {
				leaving := wholeNodePod("leaving", 10, "n-1")
				if tt.terminating {
					leaving.DeletionTimestamp = &metav1.Time{Time: time.Now()}
				}
				running = append(running, leaving)
			}
			all := append([]*corev1.Pod{tt.preemptor}, running...)
			p := clusterPreemption(t, state.NewStatic(nil, all), 2, running, all)
			statuses := framework.NewDefaultNodeToStatus()
			statuses.SetAbsentNodesStatus(fwk.NewStatus(fwk.Unschedulable))
			result, status := p.PostFilter(context.Background(), framework.NewCycleState(), tt.preemptor, statuses)
			assert.Equal(t, tt.wantCode, status.Code(), status.Message())
			if tt.nominated {
				require.NotNil(t, result)
				assert.Equal(t, fwk.ModeOverride, result.NominatingInfo.NominatingMode)
				assert.Contains(t, []string{"n-0", "n-1"}, result.NominatingInfo.NominatedNodeName)
				return
			}
			assert.Equal(t, tt.wantResult, result)
		})
	}
}

// A pending gang member preempts for its gang's quorum only when Gang's
// PreFilter said the gang waits for room, every member needed exists, and
// preemption can plan the room it needs; else nothing is evicted for it,
// and the message says why.
func TestPreemptorForAGang(t *testing.T) {
	key := state.GroupKey{Namespace: "ns", Name: "g"}
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}}
	pending := func(n int) []*corev1.Pod {
		pods := make([]*corev1.Pod, n)
		for i := range pods {
			pods[i] = running(fmt.Sprintf("g-%d", i), 100, "g")
			pods[i].Spec.NodeName = ""
		}
		return pods
	}
	tests := []struct {
		name        string
		members     int
		room        *state.GangNeedsRoom
		wantMembers int
		wantRefusal string
	}{
		{name: "waiting for room", members: 3, room: &state.GangNeedsRoom{Key: key, Topology: &planner.Topology{Required: "example.com/rack", Levels: []string{"example.com/rack"}}}, wantMembers: 3},
		{name: "not waiting for room", members: 3, wantRefusal: "not preempting: gang ns/g is not waiting for room"},
		{name: "another gang's room", members: 3, room: &state.GangNeedsRoom{Key: state.GroupKey{Namespace: "ns", Name: "other"}}, wantRefusal: "is not waiting for room"},
		{name: "members missing", members: 2, room: &state.GangNeedsRoom{Key: key}, wantRefusal: "not preempting: gang ns/g needs 1 more members than are pending"},
		{name: "roles requiring domains of their own: planned for, each in its domain", members: 3,
			room: &state.GangNeedsRoom{Key: key, Topology: &planner.Topology{Levels: []string{planner.Anywhere},
				Roles: []planner.RoleTopology{{Name: "workers", Required: "nvidia.com/gpu.clique", Levels: []string{"nvidia.com/gpu.clique"}}},
				OfPod: func(*corev1.Pod) string { return "workers" }}},
			wantMembers: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := pending(tt.members)
			p := wired(&Preemption{store: readState(state.NewStatic([]*schedv1alpha1.PodGroup{pg}, pods))})
			cycle := framework.NewCycleState()
			if tt.room != nil {
				cycle.Write(state.GangNeedsRoomKey, tt.room)
			}
			who, refusal := p.preemptorFor(cycle, pods[0])
			if tt.wantRefusal != "" {
				assert.Nil(t, who)
				assert.Contains(t, refusal, tt.wantRefusal)
				return
			}
			assert.Empty(t, refusal)
			assert.Len(t, who.members, tt.wantMembers)
			assert.Equal(t, tt.room.Topology, who.topology)
		})
	}
}
