package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// The per-member check judges each member on a node by its own spec (not
// the spec of the member whose cycle runs), then by the caller's filter,
// and says what refused a member first fit could not place.
func TestMemberCheck(t *testing.T) {
	tainted := node("gpu-0", "16", 4, []string{"pool=gpu"})
	tainted.Node().Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	cordoned := node("cpu-1", "16", 0, []string{"pool=cpu"})
	cordoned.Node().Spec.Unschedulable = true
	nodes := []fwk.NodeInfo{node("cpu-0", "16", 0, []string{"pool=cpu"}), tainted, cordoned}

	leader := pod("leader", "leader", "2", 0)
	leader.Spec.NodeSelector = map[string]string{"pool": "cpu"}
	worker := pod("worker", "workers", "4", 1)
	worker.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
	twin := worker.DeepCopy()
	twin.Name, twin.UID = "twin", "twin"
	members := []*corev1.Pod{leader, worker, twin}

	tests := []struct {
		name    string
		filter  func(*corev1.Pod, fwk.NodeInfo) bool
		member  int
		node    int
		want    bool
		wantWhy string
	}{
		{name: "the leader's selector allows the cpu node", member: 0, node: 0, want: true},
		{name: "the leader's selector refuses the GPU node", member: 0, node: 1, want: false,
			wantWhy: "member leader: its node selector, affinity or tolerations refuse 1 node(s) with room for it"},
		{name: "a cordoned node refuses a member without the toleration", member: 0, node: 2, want: false},
		{name: "the worker tolerates the GPU taint", member: 1, node: 1, want: true},
		{name: "the caller's filter refuses what the spec allows", member: 1, node: 1, want: false,
			filter:  func(_ *corev1.Pod, n fwk.NodeInfo) bool { return n.Node().Name != "gpu-0" },
			wantWhy: "member worker: the scheduler's filters refuse 1 node(s) with room for it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newMemberCheck(members, nodes, nil, tt.filter)
			var f capacity.Fit
			assert.Equal(t, tt.want, c.Place(&f, tt.member, tt.node))
			if tt.wantWhy != "" {
				assert.Equal(t, tt.wantWhy, c.why(tt.member))
			}
		})
	}

	c := newMemberCheck(members, nodes, nil, nil)
	assert.True(t, c.Alike(1, 2), "two workers of one spec are one kind: judged once per node")
	assert.False(t, c.Alike(0, 1), "the leader and a worker are not")
	assert.Empty(t, c.why(1), "nothing refused the worker yet")
}

// kindKey tells members the checks judge alike: same selectors, affinity,
// tolerations and claim templates; a member naming a claim of its own is a
// kind of its own.
func TestKindKey(t *testing.T) {
	a := pod("a", "workers", "4", 1)
	b := pod("b", "workers", "8", 2) // requests differ: the count judges those
	selecting := a.DeepCopy()
	selecting.Spec.NodeSelector = map[string]string{"pool": "gpu"}
	claim := "own-claim"
	named := a.DeepCopy()
	named.UID = "named"
	named.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim}}
	namedToo := named.DeepCopy()
	namedToo.UID = "named-too"
	assert.Equal(t, kindKey(a), kindKey(b))
	assert.NotEqual(t, kindKey(a), kindKey(selecting))
	assert.NotEqual(t, kindKey(named), kindKey(namedToo), "a claim of its own makes a member a kind of its own")
}
