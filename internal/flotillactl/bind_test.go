package flotillactl

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Where bind-scheduler puts the scheduler's pending pods: nodes a
// scheduler would refuse are skipped with their reason, replicas spread
// one per node, and a pod no node takes is named with why each refused.
func TestPlanBindings(t *testing.T) {
	created := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	replica := func(name string, age int, mutate ...func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "flotilla-system", CreationTimestamp: metav1.NewTime(created.Add(-time.Duration(age) * time.Minute)),
				Labels: map[string]string{"app.kubernetes.io/name": "flotilla-scheduler"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "scheduler", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		}
		for _, m := range mutate {
			m(&p)
		}
		return p
	}
	onNode := func(node string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.NodeName = node } }
	node := func(name string, mutate ...func(*corev1.Node)) corev1.Node {
		n := corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, "pool": "system"}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
		for _, m := range mutate {
			m(&n)
		}
		return n
	}
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}
	}
	gpuPool := func(n *corev1.Node) { n.Labels["pool"] = "gpu" }
	cpus := func(q string) func(*corev1.Node) {
		return func(n *corev1.Node) { n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse(q) }
	}
	user := func(node, cpu string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "user-on-" + node, Namespace: "ml"}, Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	}
	for _, c := range []struct {
		name         string
		pending      []corev1.Pod
		nodes        []corev1.Node
		bound        []corev1.Pod
		replicas     []corev1.Pod
		only         []string
		want         []string // pod=node, in binding order
		wantUnplaced []string
	}{
		{
			name:    "skips nodes a scheduler refuses, one replica per node",
			pending: []corev1.Pod{replica("new-b", 1), replica("new-a", 2)},
			nodes:   []corev1.Node{node("a"), node("b"), node("c", cordoned), node("d", notReady), node("e", tainted)},
			want:    []string{"new-a=a", "new-b=b"},
		},
		{
			name:     "beside a replica still bound, on another node",
			pending:  []corev1.Pod{replica("new", 1)},
			nodes:    []corev1.Node{node("a"), node("b")},
			replicas: []corev1.Pod{replica("old", 9, onNode("a"))},
			want:     []string{"new=b"},
		},
		{
			name:    "the node with more free cpu among equals",
			pending: []corev1.Pod{replica("new", 1)},
			nodes:   []corev1.Node{node("a"), node("b")},
			bound:   []corev1.Pod{user("a", "2")},
			want:    []string{"new=b"},
		},
		{
			name: "a taint the pod tolerates and its node selector",
			pending: []corev1.Pod{replica("new", 1, func(p *corev1.Pod) {
				p.Spec.NodeSelector = map[string]string{"pool": "gpu"}
				p.Spec.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}
			})},
			nodes: []corev1.Node{node("a"), node("g", tainted, gpuPool)},
			want:  []string{"new=g"},
		},
		{
			name:    "only the nodes named, both replicas there when they fit",
			pending: []corev1.Pod{replica("new-a", 2), replica("new-b", 1)},
			nodes:   []corev1.Node{node("a"), node("b")},
			only:    []string{"b"},
			want:    []string{"new-a=b", "new-b=b"},
		},
		{
			name:         "the second replica finds no room",
			pending:      []corev1.Pod{replica("new-a", 2), replica("new-b", 1)},
			nodes:        []corev1.Node{node("a", cpus("1500m")), node("c", cordoned)},
			want:         []string{"new-a=a"},
			wantUnplaced: []string{"pod new-b fits no node: 1 node(s) cordoned (c); 1 node(s) insufficient cpu (500m free, 1 asked) (a)"},
		},
		{
			name:         "no nodes",
			pending:      []corev1.Pod{replica("new", 1)},
			wantUnplaced: []string{"pod new fits no node: the cluster has no nodes"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan, unplaced := planBindings(c.pending, c.nodes, append(c.bound, c.replicas...), c.replicas, sets.New(c.only...))
			var got []string
			for _, b := range plan {
				got = append(got, fmt.Sprintf("%s=%s", b.pod.Name, b.node))
			}
			assert.Equal(t, c.want, got)
			assert.Equal(t, c.wantUnplaced, unplaced)
		})
	}
}

// A lease is held while its holder renews it within its duration.
func TestLeaseHeldBy(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	lease := func(holder string, renewedAgo time.Duration, seconds int32) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-scheduler"}}
		if holder != "" {
			l.Spec.HolderIdentity = &holder
		}
		if renewedAgo >= 0 {
			l.Spec.RenewTime = &metav1.MicroTime{Time: now.Add(-renewedAgo)}
		}
		if seconds > 0 {
			l.Spec.LeaseDurationSeconds = &seconds
		}
		return l
	}
	for _, c := range []struct {
		name  string
		lease *coordinationv1.Lease
		want  string
	}{
		{name: "renewed within its duration", lease: lease("replica-a", 5*time.Second, 15), want: "replica-a holds the lease kube-system/kube-scheduler (renewed 5s ago, for 15s)"},
		{name: "its holder gone past the duration", lease: lease("replica-a", 16*time.Second, 15)},
		{name: "released: no holder", lease: lease("", time.Second, 15)},
		{name: "never renewed", lease: lease("replica-a", -1, 15)},
		{name: "no duration", lease: lease("replica-a", time.Second, 0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, heldBy(c.lease, now))
		})
	}
}
