package preemption

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
)

const gi = int64(1) << 30

// reclaimTree is a random queue tree with pods in its leaves (parents have
// none of their own: a parent's own pods share its deserved as a child
// without a name, which the rule does not split off), every pod 1 cpu +
// 1Gi on a cluster short of cpu and with memory to spare, as ordinary
// batch pods are.
type reclaimTree struct {
	queues           []*flotillav1alpha1.Queue
	parent           map[string]string
	leaves           []string
	placed, pending  map[string]int
	capacity         int // cpu, in pods
	capability       map[string]int
	notReclaimable   map[string]bool
	guaranteedInPods map[string]int
}

func randomReclaimTree(rng *rand.Rand) *reclaimTree {
	t := &reclaimTree{parent: map[string]string{}, placed: map[string]int{}, pending: map[string]int{},
		capability: map[string]int{}, notReclaimable: map[string]bool{}, guaranteedInPods: map[string]int{}, capacity: 8 + rng.IntN(16)}
	n := 2 + rng.IntN(6)
	hasChild := map[string]bool{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("q%d", i)
		q := &flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flotillav1alpha1.QueueSpec{Weight: int32(1 + rng.IntN(4))}}
		if i > 0 && rng.IntN(3) > 0 {
			q.Spec.Parent = fmt.Sprintf("q%d", rng.IntN(i))
			t.parent[name] = q.Spec.Parent
			hasChild[q.Spec.Parent] = true
		}
		if rng.IntN(5) == 0 {
			t.capability[name] = 2 + rng.IntN(t.capacity)
			q.Spec.Capability = corev1.ResourceList{corev1.ResourceCPU: *resourceCPU(t.capability[name])}
		}
		if rng.IntN(5) == 0 {
			t.guaranteedInPods[name] = 1 + rng.IntN(t.capacity/2)
			if c, capped := t.capability[name]; capped {
				t.guaranteedInPods[name] = min(t.guaranteedInPods[name], c)
			}
			q.Spec.Guarantee = corev1.ResourceList{corev1.ResourceCPU: *resourceCPU(t.guaranteedInPods[name])}
		}
		if rng.IntN(6) == 0 {
			no := false
			q.Spec.Reclaimable = &no
			t.notReclaimable[name] = true
		}
		t.queues = append(t.queues, q)
	}
	free := t.capacity
	for _, q := range t.queues {
		if hasChild[q.Name] {
			continue
		}
		t.leaves = append(t.leaves, q.Name)
		t.placed[q.Name] = rng.IntN(free + 1)
		free -= t.placed[q.Name]
		t.pending[q.Name] = rng.IntN(t.capacity)
	}
	return t
}

func resourceCPU(pods int) *resource.Quantity {
	return resource.NewQuantity(int64(pods), resource.DecimalSI)
}

// view builds the accounting the scheduler would have of the tree's pods.
func (t *reclaimTree) view() *queues.QueueView {
	var pods []*corev1.Pod
	for _, leaf := range t.leaves {
		for i := 0; i < t.placed[leaf]+t.pending[leaf]; i++ {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("%s-%d", leaf, i), UID: types.UID(fmt.Sprintf("%s-%d", leaf, i)),
				Labels: map[string]string{flotillav1alpha1.QueueLabel: leaf}}}
			pod.Spec.SchedulerName = "flotilla-scheduler"
			pod.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: oneCPUOneGi().List()}}}
			if i < t.placed[leaf] {
				pod.Spec.NodeName = "n"
			}
			pods = append(pods, pod)
		}
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	node.Status.Allocatable = capacity.Resources{corev1.ResourceCPU: int64(t.capacity) * 1000, corev1.ResourceMemory: 1000 * gi}.List()
	return queues.NewStaticQueues(state.NewStatic(nil, pods), "default", t.queues, []*corev1.Node{node}, "flotilla-scheduler").View()
}

func oneCPUOneGi() capacity.Resources {
	return capacity.Resources{corev1.ResourceCPU: 1000, corev1.ResourceMemory: gi}
}

// path is a queue and its ancestors, leaf first, read off the specs.
func (t *reclaimTree) path(q string) []string {
	out := []string{q}
	for p, ok := t.parent[q]; ok; p, ok = t.parent[p] {
		out = append(out, p)
	}
	return out
}

// subtreePlaced counts the placed pods of q's subtree by walking every leaf.
func (t *reclaimTree) subtreePlaced(q string) int {
	n := 0
	for _, leaf := range t.leaves {
		if slices.Contains(t.path(leaf), q) {
			n += t.placed[leaf]
		}
	}
	return n
}

// reclaimsReference is the rule of doc.go, computed from scratch: a pod of
// leaf v is a reclaim victim for a pod of leaf x when, below the lowest
// queue their paths share, every queue on v's side is above its deserved
// cpu and reclaimable, and every queue on x's side stays within its
// deserved share (cpu and memory) and capability with x's pod admitted.
func (t *reclaimTree) reclaimsReference(view *queues.QueueView, v, x string) bool {
	vPath, xPath := t.path(v), t.path(x)
	var vSide, xSide []string
	for _, q := range vPath {
		if slices.Contains(xPath, q) {
			break
		}
		vSide = append(vSide, q)
	}
	for _, q := range xPath {
		if slices.Contains(vPath, q) {
			break
		}
		xSide = append(xSide, q)
	}
	if len(vSide) == 0 {
		return false
	}
	for _, q := range vSide {
		if t.notReclaimable[q] || int64(t.subtreePlaced(q))*1000 <= view.Queues[q].Deserved[corev1.ResourceCPU] {
			return false
		}
	}
	for _, q := range xSide {
		after := int64(t.subtreePlaced(q)+1) * 1000
		if c, capped := t.capability[q]; capped && after > int64(c)*1000 {
			return false
		}
		if after > view.Queues[q].Deserved[corev1.ResourceCPU] && after <= int64(t.capacity)*1000 {
			return false
		}
		// Memory is plentiful: a queue deserves all it asks for, and the
		// pod's memory is in its pending demand already.
		if mem := view.Queues[q].Deserved[corev1.ResourceMemory]; mem < view.Queues[q].Allocated[corev1.ResourceMemory]+gi {
			return false
		}
	}
	return true
}

// reclaims is the implementation's answer: may the preemptor in x take a
// single pod of v, with the cluster short of cpu?
func reclaims(t *testing.T, view *queues.QueueView, v, x string) bool {
	who := &preemptor{queue: x, request: oneCPUOneGi()}
	w := &world{view: view, leaving: queues.Released{}, charged: queues.ChargedProfiles{"flotilla-scheduler": true}}
	w.reclaimFrom = reclaimableQueues(view, who, queues.Released{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "victim", UID: "victim"}, Spec: corev1.PodSpec{SchedulerName: "flotilla-scheduler"}}
	pod.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: oneCPUOneGi().List()}}}
	eligible, reclaim := w.eligible(who, pod, v)
	if !eligible {
		return false
	}
	require.True(t, reclaim, "a pod of another queue is a reclaim")
	info, err := framework.NewPodInfo(pod)
	require.NoError(t, err)
	u := &unit{members: []member{{info: info, node: "n"}}, queue: v, reclaim: true}
	return len(w.sequence(who, []corev1.ResourceName{corev1.ResourceCPU}, []*unit{u})) == 1
}

// The reclaim rule on random trees against the reference computed from
// the specs and the pods alone (subtree sums, the parting of two paths),
// and the reason reclaim stops: once a pod moved by reclaim from v to x,
// the shares unchanged (demand is the same), v never reclaims it back.
func TestReclaimRuleMatchesReferenceOnRandomTrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 1))
	var reclaimed, refused int
	for i := 0; i < 1500; i++ {
		tree := randomReclaimTree(rng)
		view := tree.view()
		for _, leaf := range tree.leaves {
			require.Equal(t, int64(tree.placed[leaf])*1000, view.Queues[leaf].Allocated[corev1.ResourceCPU])
		}
		for _, q := range tree.queues {
			require.Equal(t, int64(tree.subtreePlaced(q.Name))*1000, view.Queues[q.Name].Allocated[corev1.ResourceCPU],
				"%s's allocated is its subtree's\n%s", q.Name, tree)
		}
		for _, v := range tree.leaves {
			for _, x := range tree.leaves {
				if v == x || tree.placed[v] == 0 || tree.pending[x] == 0 {
					continue
				}
				want := tree.reclaimsReference(view, v, x)
				require.Equal(t, want, reclaims(t, view, v, x), "may a pod of %s reclaim one of %s?\n%s", x, v, tree)
				if !want {
					refused++
					continue
				}
				reclaimed++
				moved := *tree
				moved.placed, moved.pending = maps.Clone(tree.placed), maps.Clone(tree.pending)
				moved.placed[v]--
				moved.pending[v]++
				moved.placed[x]++
				moved.pending[x]--
				after := moved.view()
				for _, q := range tree.queues {
					require.Equal(t, view.Queues[q.Name].Deserved, after.Queues[q.Name].Deserved, "a reclaim keeps every queue's demand, so its share")
				}
				require.False(t, reclaims(t, after, x, v), "%s reclaimed a pod from %s and would lose it again\n%s", x, v, tree)
			}
		}
	}
	require.Greater(t, reclaimed, 100, "the trees exercise reclaims")
	require.Greater(t, refused, 100, "and refusals")
}

func (t *reclaimTree) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "capacity %d cpu\n", t.capacity)
	for _, q := range t.queues {
		fmt.Fprintf(&b, "  %s parent=%q weight=%d capability=%d guarantee=%d noReclaim=%v placed=%d pending=%d\n", q.Name, q.Spec.Parent, q.Spec.Weight,
			t.capability[q.Name], t.guaranteedInPods[q.Name], t.notReclaimable[q.Name], t.placed[q.Name], t.pending[q.Name])
	}
	return b.String()
}
