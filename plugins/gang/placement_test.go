package gang

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nativev1beta1 "k8s.io/api/scheduling/v1beta1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/events"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// The placements Gang proposes for a native PodGroup in kube-scheduler's
// pod-group cycle: the in-tree generator's (one per domain of the group's
// topology key, pinned where members run, the parent without a key), less
// the domains that cannot hold the members the quorum still needs, by
// aggregate room. The group is mixed, as serving groups are: a leader of 2
// cpu / 4Gi and workers of 4 cpu / 8Gi, minCount 4.
func TestGeneratePlacements(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	const zone = "topology.kubernetes.io/zone"
	node := func(name, zoneName, cpu, memory string) *corev1.Node {
		n := st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{
			corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory, corev1.ResourcePods: "110"}).Obj()
		if zoneName != "" {
			n.Labels = map[string]string{zone: zoneName}
		}
		return n
	}
	pod := func(name, cpu, memory string) *st.PodWrapper {
		return st.MakePod().Namespace("ns").Name(name).UID(name).PodGroupName("serve").
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory})
	}
	filler := func(name, nodeName, cpu, memory string) *corev1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Node(nodeName).
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory}).Obj()
	}
	mixed := func() []*corev1.Pod {
		return []*corev1.Pod{pod("leader", "2", "4Gi").Obj(), pod("worker-0", "4", "8Gi").Obj(),
			pod("worker-1", "4", "8Gi").Obj(), pod("worker-2", "4", "8Gi").Obj()}
	}
	// Zone a: two 8-cpu nodes, 12 cpu taken; zone b: two empty 8-cpu nodes.
	twoZones := []*corev1.Node{node("a-0", "a", "8", "32Gi"), node("a-1", "a", "8", "32Gi"),
		node("b-0", "b", "8", "32Gi"), node("b-1", "b", "8", "32Gi")}
	busyA := []*corev1.Pod{filler("busy-0", "a-0", "6", "8Gi"), filler("busy-1", "a-1", "6", "8Gi")}

	tests := []struct {
		name        string
		topology    string
		nodes       []*corev1.Node
		running     []*corev1.Pod // on nodes: fillers, and members already placed
		waiting     []*corev1.Pod
		want        []string // placement names, in order
		wantCode    fwk.Code
		wantMessage string
		wantEvent   string
	}{
		{
			name: "no topology: the parent placement", nodes: twoZones, running: busyA, waiting: mixed(),
			want: []string{""},
		},
		{
			name: "both zones hold the group: both", topology: zone, nodes: twoZones, waiting: mixed(),
			want: []string{"a", "b"},
		},
		{
			name: "zone a has 4 of the 14 cpu the group needs: only b", topology: zone, nodes: twoZones, running: busyA, waiting: mixed(),
			want: []string{"b"},
		},
		{
			name: "memory counts as cpu does", topology: zone,
			nodes: []*corev1.Node{node("a-0", "a", "16", "16Gi"), node("b-0", "b", "16", "64Gi")}, waiting: mixed(),
			want: []string{"b"},
		},
		{
			name: "a member runs in zone a: the group stays there though b is emptier", topology: zone, nodes: twoZones,
			running: []*corev1.Pod{pod("worker-0", "4", "8Gi").Node("a-0").Obj()},
			waiting: []*corev1.Pod{pod("leader", "2", "4Gi").Obj(), pod("worker-1", "4", "8Gi").Obj(), pod("worker-2", "4", "8Gi").Obj()},
			want:    []string{"a"},
		},
		{
			name: "the quorum needs only its smallest waiting members: room for the leader and one worker is enough", topology: zone,
			nodes: twoZones,
			running: []*corev1.Pod{pod("worker-0", "4", "8Gi").Node("a-0").Obj(), pod("worker-1", "4", "8Gi").Node("a-1").Obj(),
				filler("busy-0", "a-0", "2", "8Gi")},
			waiting: []*corev1.Pod{pod("leader", "2", "4Gi").Obj(), pod("worker-2", "4", "8Gi").Obj(), pod("worker-3", "4", "8Gi").Obj()},
			want:    []string{"a"},
		},
		{
			name: "members split across zones: unschedulable, the zones named", topology: zone,
			nodes:    []*corev1.Node{node("a-0", "a", "6", "32Gi"), node("b-0", "b", "5", "32Gi")},
			running:  []*corev1.Pod{pod("worker-0", "4", "8Gi").Node("a-0").Obj(), pod("worker-1", "4", "8Gi").Node("b-0").Obj()},
			waiting:  []*corev1.Pod{pod("leader", "2", "4Gi").Obj(), pod("worker-2", "4", "8Gi").Obj()},
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: "members run in 2 topology.kubernetes.io/zone domains (a, b)",
		},
		{
			name: "no zone has room: the closest is still tried, so that preemption can run, and the group is told", topology: zone,
			nodes:   twoZones,
			running: append(append([]*corev1.Pod{}, busyA...), filler("busy-2", "b-0", "8", "8Gi"), filler("busy-3", "b-1", "7", "8Gi")),
			waiting: mixed(),
			want:    []string{"a"}, wantEvent: "WaitingForTopologyDomain: no topology.kubernetes.io/zone domain has room for the 4 members the group still needs (closest: a, 4 of 14 cpu free)",
		},
		{
			name: "a resource no node has in allocatable is the filters' (DRA devices): not checked", topology: zone, nodes: twoZones,
			waiting: []*corev1.Pod{pod("leader", "2", "4Gi").Obj(),
				pod("worker-0", "4", "8Gi").Req(map[corev1.ResourceName]string{"nvidia.com/gpu": "1"}).Obj()},
			want: []string{"a", "b"},
		},
		{
			name: "no node has the key", topology: "example.com/rack", nodes: twoZones, waiting: mixed(),
			wantCode: fwk.UnschedulableAndUnresolvable, wantMessage: "no node has the topology label example.com/rack",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			group := st.MakePodGroup().Namespace("ns").Name("serve").MinCount(4)
			if tt.topology != "" {
				group = group.TopologyKey(tt.topology)
			}
			snapshot := cache.NewTestSnapshotWithPodGroups(tt.running, tt.nodes, []*nativev1beta1.PodGroup{group.Obj()})
			recorder := events.NewFakeRecorder(10)
			store := state.WithNative(state.NewStatic(nil, nil), []*nativev1beta1.PodGroup{group.Obj()}, nil)
			g := &Gang{store: store, handle: handletest.New(t, "flotilla-scheduler",
				frameworkruntime.WithSnapshotSharedLister(snapshot), frameworkruntime.WithEventRecorder(recorder))}
			nodes, err := snapshot.NodeInfos().List()
			require.NoError(t, err)
			info := &framework.PodGroupInfo{Namespace: "ns", Name: "serve", Type: fwk.PodGroupKeyType, PodGroup: group.Obj(), UnscheduledPods: tt.waiting}

			result, status := g.GeneratePlacements(context.Background(), framework.NewCycleState(), info, &fwk.Placement{Nodes: nodes})

			if tt.wantCode != fwk.Success {
				require.Equal(t, tt.wantCode, status.Code(), status.Message())
				assert.Contains(t, status.Message(), tt.wantMessage)
				return
			}
			require.True(t, status.IsSuccess(), status.Message())
			var names []string
			for _, p := range result.Placements {
				names = append(names, p.Name)
				for _, n := range p.Nodes {
					if tt.topology != "" {
						assert.Equal(t, p.Name, n.Node().Labels[tt.topology], "placement %s holds only its domain's nodes", p.Name)
					}
				}
			}
			assert.Equal(t, tt.want, names)
			var said []string
			for len(recorder.Events) > 0 {
				said = append(said, <-recorder.Events)
			}
			if tt.wantEvent == "" {
				assert.Empty(t, said)
				return
			}
			require.Len(t, said, 1)
			assert.True(t, strings.HasSuffix(said[0], tt.wantEvent), said[0])
		})
	}
}
