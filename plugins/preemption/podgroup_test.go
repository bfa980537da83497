package preemption

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	nativev1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// groupInfo is the pod group kube-scheduler's pod-group cycle hands
// PodGroupPostFilter.
type groupInfo struct {
	fwk.PodGroupInfo
	namespace, name string
	kind            fwk.EntityKeyType
	pending         []*corev1.Pod
}

func (g groupInfo) GetUnscheduledPods() []*corev1.Pod { return g.pending }
func (g groupInfo) GetName() string                   { return g.name }
func (g groupInfo) GetNamespace() string              { return g.namespace }
func (g groupInfo) GetType() fwk.EntityKeyType        { return g.kind }
func (g groupInfo) GetKey() string                    { return g.namespace + "/" + g.name }
func (g groupInfo) GetPodGroup() *nativev1beta1.PodGroup {
	return nil
}
func (g groupInfo) GetCompositePodGroup() *schedulingv1alpha3.CompositePodGroup { return nil }

// nativeMember is a pending member of the native group, of its own size
// (a leader unlike its workers).
func nativeMember(name, group, cpu, memory string) *corev1.Pod {
	pod := st.MakePod().Namespace("ns").Name(name).UID(name).Priority(1000).
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory}).Obj()
	pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return pod
}

// nativeGang is a native PodGroup of minCount, in a clique when level is
// set.
func nativeGang(name string, minCount int32, level string) *nativev1beta1.PodGroup {
	pg := &nativev1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "1"},
		Spec: nativev1beta1.PodGroupSpec{SchedulingPolicy: nativev1beta1.PodGroupSchedulingPolicy{Gang: &nativev1beta1.GangSchedulingPolicy{MinCount: minCount}}}}
	if level != "" {
		pg.Spec.SchedulingConstraints = &nativev1beta1.PodGroupSchedulingConstraints{Topology: []nativev1beta1.TopologyConstraint{{Key: level}}}
	}
	return pg
}

// What a native group preempts for: the members its quorum still needs
// (leader and workers alike, each of its own size), in its topology
// domain, pinned where members already run; a basic group's first pod
// alone; nothing, and why, when too few members are pending.
func TestPreemptorForANativeGroup(t *testing.T) {
	const clique = "nvidia.com/gpu.clique"
	tests := []struct {
		name        string
		group       *nativev1beta1.PodGroup
		placed      map[string]string // running member -> node
		wantMembers []string
		wantLevel   string
		wantPinned  []string
		wantWhat    string
		wantRefusal string
	}{
		{name: "a gang: its quorum, leader and workers", group: nativeGang("serve", 4, ""),
			wantMembers: []string{"leader", "worker-0", "worker-1", "worker-2"}, wantWhat: "gang ns/serve (scheduling.k8s.io)"},
		{name: "a gang in a clique, one worker running: pinned to its clique", group: nativeGang("serve", 4, clique),
			placed:      map[string]string{"worker-2": "a-0"},
			wantMembers: []string{"leader", "worker-0", "worker-1"}, wantLevel: clique, wantPinned: []string{"a"}, wantWhat: "gang ns/serve (scheduling.k8s.io)"},
		{name: "more members than exist", group: nativeGang("serve", 5, ""),
			wantRefusal: "not preempting: gang ns/serve (scheduling.k8s.io) needs 1 more members than are pending"},
		{name: "a basic group: its first pod", group: &nativev1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "serve"},
			Spec: nativev1beta1.PodGroupSpec{SchedulingPolicy: nativev1beta1.PodGroupSchedulingPolicy{Basic: &nativev1beta1.BasicSchedulingPolicy{}}}},
			wantMembers: []string{"leader"}, wantWhat: "pod ns/leader"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := []*corev1.Pod{nativeMember("leader", "serve", "2", "4Gi")}
			for i := range 3 {
				pods = append(pods, nativeMember(fmt.Sprintf("worker-%d", i), "serve", "4", "8Gi"))
			}
			var nodes []*corev1.Node
			for _, name := range []string{"a-0", "b-0"} {
				nodes = append(nodes, st.MakeNode().Name(name).Label(clique, name[:1]).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi"}).Obj())
			}
			for _, p := range pods {
				p.Spec.NodeName = tt.placed[p.Name]
			}
			snapshot := schedcache.NewSnapshot(pods, nodes)
			p := wired(&Preemption{
				handle: handletest.New(t, "flotilla-scheduler", frameworkruntime.WithSnapshotSharedLister(snapshot)),
				store:  readState(state.WithNative(state.NewStatic(nil, pods), []*nativev1beta1.PodGroup{tt.group}, nil)),
			})
			who, refusal := p.nativePreemptor(pods[0], state.GroupKey{Namespace: "ns", Name: "serve", Native: true})
			if tt.wantRefusal != "" {
				assert.Nil(t, who)
				assert.Equal(t, tt.wantRefusal, refusal)
				return
			}
			require.NotNil(t, who, refusal)
			var got []string
			for _, m := range who.members {
				got = append(got, m.Name)
			}
			sort.Strings(got)
			assert.Equal(t, tt.wantMembers, got)
			assert.Equal(t, tt.wantLevel, who.level())
			if who.topology != nil {
				assert.Equal(t, tt.wantPinned, who.topology.Pinned)
			}
			assert.Equal(t, tt.wantWhat, who.what.String())
		})
	}
}

// PodGroupPostFilter preempts for a native gang of mixed members as
// PostFilter does for a scheduler-plugins gang: the lower-priority pods
// whose room the whole quorum needs are evicted (none more), and every
// member is nominated to its node. Without the member's cycle state kept
// by PreFilter, or for a composite group, it says why it does not.
func TestPodGroupPostFilter(t *testing.T) {
	tests := []struct {
		name        string
		kind        fwk.EntityKeyType
		skipPre     bool
		wantVictims []string
		wantStatus  fwk.Code
		wantMessage string
	}{
		{name: "a gang of a leader and workers: room for all of them", kind: fwk.PodGroupKeyType,
			wantVictims: []string{"low-0", "low-1"}, wantStatus: fwk.Success, wantMessage: "preempting 2 pods for gang ns/serve (scheduling.k8s.io)"},
		{name: "no cycle state kept", kind: fwk.PodGroupKeyType, skipPre: true,
			wantStatus: fwk.Unschedulable, wantMessage: "not preempting: no cycle state of ns/leader"},
		{name: "a composite group", kind: fwk.CompositePodGroupKeyType,
			wantStatus: fwk.Unschedulable, wantMessage: "flotilla preempts for pod groups, not for composite groups"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Three nodes of 8 cpu: two run a 7-cpu pod of priority 10,
			// one a pod of priority 5000. The leader asks 2 cpu, the
			// worker 7: no node holds both, so both low pods go.
			low0, low1 := wholeNodePod("low-0", 10, "n-0"), wholeNodePod("low-1", 10, "n-1")
			high := wholeNodePod("high", 5000, "n-2")
			leader := nativeMember("leader", "serve", "2", "4Gi")
			worker := nativeMember("worker", "serve", "7", "8Gi")
			running := []*corev1.Pod{low0, low1, high}
			all := append([]*corev1.Pod{leader, worker}, running...)
			p := clusterPreemption(t, state.WithNative(state.NewStatic(nil, all), []*nativev1beta1.PodGroup{nativeGang("serve", 2, "")}, nil), 3, running, all)

			group := framework.NewCycleState()
			if !tt.skipPre {
				for _, m := range []*corev1.Pod{leader, worker} {
					member := framework.NewCycleState()
					member.SetPodGroupSchedulingCycle(group)
					_, status := p.PreFilter(context.Background(), member, m, nil)
					require.Equal(t, fwk.Skip, status.Code(), "PreFilter decides nothing")
				}
			}
			info := groupInfo{namespace: "ns", name: "serve", kind: tt.kind, pending: []*corev1.Pod{leader, worker}}
			result, status := p.PodGroupPostFilter(context.Background(), group, info, nil)
			assert.Equal(t, tt.wantStatus, status.Code(), status.Message())
			assert.Contains(t, status.Message(), tt.wantMessage)
			if tt.wantStatus != fwk.Success {
				assert.Nil(t, result)
				return
			}
			e := p.evictions.inFlight["gang/"+state.GroupKey{Namespace: "ns", Name: "serve", Native: true}.String()]
			require.NotNil(t, e, "the eviction is tracked under the gang")
			var victims []string
			for _, v := range e.victims {
				victims = append(victims, v.name)
			}
			sort.Strings(victims)
			assert.Equal(t, tt.wantVictims, victims)
			require.Len(t, result.NominatingInfos, 2, "every member is nominated")
			for _, m := range []*corev1.Pod{leader, worker} {
				info := result.NominatingInfos[types.NamespacedName{Namespace: "ns", Name: m.Name}]
				require.NotNil(t, info, m.Name)
				assert.Contains(t, []string{"n-0", "n-1"}, info.NominatedNodeName, "%s is nominated where its room is made", m.Name)
			}
		})
	}
}
