package integration

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// startPreemptionCluster starts the shipped scheduler over the nodes, with
// terminating pods finished as kubelets would, and priority classes low
// (10), high (1000) and high-never (1000, preemptionPolicy Never).
func startPreemptionCluster(t *testing.T, nodes ...cluster.NodeSpec) *harness.Harness {
	t.Helper()
	h := startCluster(t, "scheduler-config.yaml", nodes...)
	require.NoError(t, h.FinishTerminatingPods(h.Ctx))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "low", 10, false))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "high", 1000, false))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "high-never", 1000, true))
	return h
}

// deletions records the last state of every pod deleted in the namespace
// from now on, by name.
type deletions struct {
	mu   sync.Mutex
	pods map[string]*corev1.Pod
}

func watchDeletions(t *testing.T, h *harness.Harness) *deletions {
	t.Helper()
	w, err := h.Client.CoreV1().Pods("default").Watch(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	d := &deletions{pods: map[string]*corev1.Pod{}}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			d.mu.Lock()
			// The DisruptionTarget condition is written before the delete;
			// remember it from the last update that had it.
			if ev.Type == watch.Deleted || pod.DeletionTimestamp != nil {
				if prev, seen := d.pods[pod.Name]; !seen || disruption(prev) == nil {
					d.pods[pod.Name] = pod
				}
			}
			d.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return d
}

func (d *deletions) names(prefix string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for name := range d.pods {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	return out
}

func (d *deletions) get(name string) *corev1.Pod {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pods[name]
}

func disruption(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.DisruptionTarget {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// eventsWithReason lists the namespace's events with the reason.
func eventsWithReason(t *testing.T, h *harness.Harness, reason string) []eventsv1.Event {
	t.Helper()
	list, err := h.Client.EventsV1().Events("default").List(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func bound(t *testing.T, h *harness.Harness, selector string) int {
	t.Helper()
	pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{LabelSelector: selector})
	require.NoError(t, err)
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

func gangWithPriority(group string, n int, cpu, priorityClass string) []cluster.PodSpec {
	specs := cluster.GangPods("default", group, n, cpu)
	for i := range specs {
		specs[i].PriorityClassName = priorityClass
	}
	return specs
}

func pinned(name, node, cpu, priorityClass string, labels map[string]string) cluster.PodSpec {
	return cluster.PodSpec{Name: name, NodeName: node, CPU: cpu, PriorityClassName: priorityClass, Labels: labels}
}

// Rule 1: a pod preempts lower-priority pods of its own queue — exactly as
// many as it needs — and preemptionPolicy Never preempts nothing.
func TestPreemptionWithinQueueTakesFewestLowerPriorityPods(t *testing.T) {
	h := startPreemptionCluster(t, cluster.NodeSpec{Name: "node-0", CPU: "4", Memory: "16Gi"})
	for i := 0; i < 4; i++ {
		require.NoError(t, h.CreatePods(h.Ctx, pinned(fmt.Sprintf("low-%d", i), "node-0", "1", "low", map[string]string{"app": "low"})))
	}
	deleted := watchDeletions(t, h)

	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "polite", CPU: "2", PriorityClassName: "high-never"}))
	cond, err := h.WaitForPodUnschedulable(h.Ctx, "default", "polite", bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, cond.Message, "preemptionPolicy is Never")
	time.Sleep(time.Second)
	assert.Empty(t, deleted.names("low-"), "preemptionPolicy Never evicts nothing")

	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "urgent", CPU: "2", PriorityClassName: "high"}))
	_, err = h.WaitForPodBound(h.Ctx, "default", "urgent", bindTimeout)
	require.NoError(t, err)
	assert.Len(t, deleted.names("low-"), 2, "2 cpu needed, 2 victims of 1 cpu")
	assert.Equal(t, 2, bound(t, h, "app=low"))
	for _, name := range deleted.names("low-") {
		c := disruption(deleted.get(name))
		require.NotNil(t, c, "victim %s has DisruptionTarget", name)
		assert.Equal(t, corev1.PodReasonPreemptionByScheduler, c.Reason)
		assert.Contains(t, c.Message, "preempted by pod default/urgent (priority 1000)")
	}
	require.Eventually(t, func() bool { return len(eventsWithReason(t, h, "Preempted")) == 2 }, bindTimeout, 200*time.Millisecond)
	assertStaysPending(t, h, "polite", 2*time.Second)
}

func assertStaysPending(t *testing.T, h *harness.Harness, name string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		pod, err := h.Client.CoreV1().Pods("default").Get(h.Ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Empty(t, pod.Spec.NodeName, "%s must stay pending", name)
		time.Sleep(200 * time.Millisecond)
	}
}

// Rule 2 and 6: a queue below its deserved share reclaims from a borrowing
// queue whatever the borrower's priority, returns it to its deserved share
// and stops there; the queue it took from never takes back.
func TestReclaimReturnsBorrowerToDeservedShareAndStops(t *testing.T) {
	h := startPreemptionCluster(t, nodes(2, "10")...)
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("borrower", 1, "")))
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("lender", 1, "")))
	for _, spec := range queuePods("borrower", 20, "1") {
		spec.PriorityClassName = "high"
		require.NoError(t, h.CreatePods(h.Ctx, spec))
	}
	_, err := h.WaitForPodsBound(h.Ctx, "default", "queue=borrower", 20, bindTimeout)
	require.NoError(t, err, "alone, a queue borrows the idle cluster")
	deleted := watchDeletions(t, h)
	reclaimsBefore := metricValue(t, "flotilla_preemption_victims_total", map[string]string{"kind": "reclaim"})

	require.NoError(t, h.CreatePods(h.Ctx, queuePods("lender", 14, "1")...))
	got := waitForBoundCPU(t, h, map[string]int64{"lender": 10000, "borrower": 10000})
	require.Equal(t, map[string]int64{"lender": 10000, "borrower": 10000}, got)
	time.Sleep(3 * time.Second)
	assert.Equal(t, map[string]int64{"lender": 10000, "borrower": 10000}, boundCPU(t, h), "reclaim stops at the deserved share")
	assert.Len(t, deleted.names("borrower-"), 10)
	assert.Empty(t, deleted.names("lender-"))
	for _, name := range deleted.names("borrower-") {
		c := disruption(deleted.get(name))
		require.NotNil(t, c, "victim %s has DisruptionTarget", name)
		assert.Contains(t, c.Message, `reclaimed by queue "lender"`)
		assert.Contains(t, c.Message, `queue "borrower" is above its deserved share`)
	}
	require.Eventually(t, func() bool { return len(eventsWithReason(t, h, "Reclaimed")) == 10 }, bindTimeout, 200*time.Millisecond)
	assert.Equal(t, reclaimsBefore+10, metricValue(t, "flotilla_preemption_victims_total", map[string]string{"kind": "reclaim"}))
	// The lender's 4 others are beyond its share: it may preempt only
	// inside itself, where nothing has a lower priority.
	assert.Equal(t, 10, bound(t, h, "queue=lender"), "4 lender pods stay pending")
	assert.Len(t, deleted.names("borrower-"), 10, "and the lender evicted nothing more")
}

// Rule 3: a running gang with minMember 4 of 6 loses its 2 surplus members,
// and after that only all of its members at once.
func TestRunningGangLosesSurplusMembersOrEverything(t *testing.T) {
	h := startPreemptionCluster(t, cluster.NodeSpec{Name: "node-0", CPU: "6", Memory: "16Gi"})
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "train", 4))
	require.NoError(t, h.CreatePods(h.Ctx, gangWithPriority("train", 6, "1", "low")...))
	_, err := h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=train", 6, bindTimeout)
	require.NoError(t, err)
	deleted := watchDeletions(t, h)

	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "urgent-a", CPU: "2", PriorityClassName: "high"}))
	_, err = h.WaitForPodBound(h.Ctx, "default", "urgent-a", bindTimeout)
	require.NoError(t, err)
	assert.Len(t, deleted.names("train-"), 2, "the 2 surplus members")
	assert.Equal(t, 4, bound(t, h, "scheduling.x-k8s.io/pod-group=train"))

	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "urgent-b", CPU: "1", PriorityClassName: "high"}))
	_, err = h.WaitForPodBound(h.Ctx, "default", "urgent-b", bindTimeout)
	require.NoError(t, err)
	// urgent-b binds as soon as one victim is gone; the others follow.
	require.Eventually(t, func() bool { return len(deleted.names("train-")) == 6 }, bindTimeout, 100*time.Millisecond,
		"no surplus left: the whole gang goes, not 1 of its 4 (deleted %v)", deleted.names("train-"))
	assert.Equal(t, 0, bound(t, h, "scheduling.x-k8s.io/pod-group=train"))
}

// Rule 4 and 5: a pending gang evicts exactly what its whole quorum needs,
// placed together — or, if even everything it may evict is not enough,
// nothing.
func TestPendingGangEvictsExactlyForItsQuorumOrNothing(t *testing.T) {
	h := startPreemptionCluster(t, nodes(4, "4")...)
	// 3 cpu of 4 used on every node: 1 free each.
	for n := 0; n < 4; n++ {
		for i := 0; i < 3; i++ {
			require.NoError(t, h.CreatePods(h.Ctx, pinned(fmt.Sprintf("low-%d-%d", n, i), fmt.Sprintf("node-%03d", n), "1", "low", map[string]string{"app": "low"})))
		}
	}
	deleted := watchDeletions(t, h)

	// 5 members of 4 cpu need 20 cpu of 16: nothing is evicted.
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "huge", 5))
	huge := gangWithPriority("huge", 5, "4", "high")
	require.NoError(t, h.CreatePods(h.Ctx, huge...))
	cond, err := h.WaitForPodUnschedulable(h.Ctx, "default", "huge-0", bindTimeout)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		pod, err := h.Client.CoreV1().Pods("default").Get(h.Ctx, "huge-0", metav1.GetOptions{})
		require.NoError(t, err)
		cond = cluster.PodScheduledCondition(pod)
		return cond != nil && strings.Contains(cond.Message, "would not make room")
	}, bindTimeout, 200*time.Millisecond, "the pod says why preemption cannot help")
	time.Sleep(2 * time.Second)
	assert.Empty(t, deleted.names("low-"), "a gang that cannot fit evicts nothing")
	for _, spec := range huge {
		require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, spec.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	}

	// 4 members of 2 cpu: one victim per node, and all 4 placed.
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "train", 4))
	require.NoError(t, h.CreatePods(h.Ctx, gangWithPriority("train", 4, "2", "high")...))
	placed, err := h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=train", 4, bindTimeout)
	require.NoError(t, err)
	assert.Len(t, deleted.names("low-"), 4, "exactly enough for the quorum")
	perNode := map[string]int{}
	for _, node := range placed {
		perNode[node]++
	}
	assert.Len(t, perNode, 4, "one member per node, where one victim each made room")
	assert.Equal(t, 8, bound(t, h, "app=low"))
}

// Rule 5: pods a PodDisruptionBudget protects are taken last.
func TestPDBProtectedPodsAreTakenLast(t *testing.T) {
	h := startPreemptionCluster(t, cluster.NodeSpec{Name: "node-0", CPU: "4", Memory: "16Gi"})
	for i := 0; i < 4; i++ {
		labels := map[string]string{"app": "low", "protected": fmt.Sprint(i < 2)}
		require.NoError(t, h.CreatePods(h.Ctx, pinned(fmt.Sprintf("low-%d", i), "node-0", "1", "low", labels)))
	}
	// With no disruption controller here the budget's status allows no
	// disruption, which is what it would say with 2 of 2 required.
	minAvailable := intstr.FromInt32(2)
	_, err := h.Client.PolicyV1().PodDisruptionBudgets("default").Create(h.Ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "protected"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"protected": "true"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	deleted := watchDeletions(t, h)
	time.Sleep(time.Second) // the scheduler's PDB informer

	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "urgent-a", CPU: "2", PriorityClassName: "high"}))
	_, err = h.WaitForPodBound(h.Ctx, "default", "urgent-a", bindTimeout)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"low-2", "low-3"}, deleted.names("low-"), "the unprotected pods first")

	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "urgent-b", CPU: "2", PriorityClassName: "high"}))
	_, err = h.WaitForPodBound(h.Ctx, "default", "urgent-b", bindTimeout)
	require.NoError(t, err)
	assert.Len(t, deleted.names("low-"), 4, "protected pods are taken last, not never")
}

// Rule 6: minutes of churn between two queues — pods finish and their
// controllers replace them, evicted ones too — compressed into seconds
// (each pod runs 1-3 s): after the first reclaim settles the shares, no
// queue reclaims from the other again.
func TestNoReclaimPingPongUnderChurn(t *testing.T) {
	h := startPreemptionCluster(t, nodes(2, "10")...)
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("a", 1, "")))
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("b", 1, "")))
	deleted := watchDeletions(t, h)
	seed := time.Now().UnixNano()
	t.Logf("churn seed %d", seed)
	rng := rand.New(rand.NewSource(seed))

	var serial int
	keep := func(ctx context.Context, queue string, want int, finishing bool, boundAt map[string]time.Time, lifetime map[string]time.Duration) error {
		pods, err := h.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "queue=" + queue})
		if err != nil {
			return err
		}
		live := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			live++
			if p.Spec.NodeName == "" || !finishing {
				continue
			}
			if _, ok := boundAt[p.Name]; !ok {
				boundAt[p.Name], lifetime[p.Name] = time.Now(), time.Second+time.Duration(rng.Int63n(int64(2*time.Second)))
			}
			if time.Since(boundAt[p.Name]) > lifetime[p.Name] {
				// The pod finished: its controller removes it.
				if err := h.Client.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err == nil {
					live--
				}
			}
		}
		for ; live < want; live++ {
			serial++
			spec := cluster.PodSpec{Name: fmt.Sprintf("%s-%05d", queue, serial), CPU: "1", Labels: map[string]string{flotillav1alpha1.QueueLabel: queue, "queue": queue}}
			if err := h.CreatePods(ctx, spec); err != nil {
				return err
			}
		}
		return nil
	}
	run := func(d time.Duration, finishing bool, queues ...string) {
		boundAt, lifetime := map[string]time.Time{}, map[string]time.Duration{}
		deadline := time.Now().Add(d)
		for time.Now().Before(deadline) {
			for _, q := range queues {
				require.NoError(t, keep(h.Ctx, q, 15, finishing, boundAt, lifetime))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// "a" alone borrows 15 of 20; "b" arrives and takes back 5.
	run(3*time.Second, false, "a")
	run(5*time.Second, false, "a", "b")
	got := waitForBoundCPU(t, h, map[string]int64{"a": 10000, "b": 10000})
	require.Equal(t, map[string]int64{"a": 10000, "b": 10000}, got)
	firstReclaim := len(deleted.names("a-"))
	assert.Equal(t, 5, firstReclaim)
	assert.Empty(t, deleted.names("b-"))

	// Churn: every pod finishes after 1-3 s and is replaced.
	reclaimedBefore := len(eventsWithReason(t, h, "Reclaimed"))
	run(25*time.Second, true, "a", "b")
	assert.Equal(t, reclaimedBefore, len(eventsWithReason(t, h, "Reclaimed")), "no reclaim once shares settled")
	for _, name := range append(deleted.names("a-"), deleted.names("b-")...) {
		if c := disruption(deleted.get(name)); c != nil {
			assert.Contains(t, c.Message, `reclaimed by queue "b"`, "only b ever reclaimed (%s)", name)
		}
	}
	final := boundCPU(t, h)
	assert.InDelta(t, 10000, final["a"], 2000)
	assert.InDelta(t, 10000, final["b"], 2000)
}

// What a pod is told about preemption says what preemption found, in terms
// of why its filters refused it, and nothing else: a gang whose
// minResources exceed the whole cluster is not told that terminating pods
// are freeing room for it (none terminate), and a pod whose queue does
// not exist is not told that no node has room.
func TestPreemptionSaysOnlyWhatItFound(t *testing.T) {
	h := startPreemptionCluster(t, nodes(2, "4")...)
	messageOf := func(name string, holds string) string {
		t.Helper()
		var message string
		require.Eventually(t, func() bool {
			pod, err := h.Client.CoreV1().Pods("default").Get(h.Ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			if cond := cluster.PodScheduledCondition(pod); cond != nil {
				message = cond.Message
			}
			return strings.Contains(message, holds)
		}, bindTimeout, 200*time.Millisecond, "pod %s's PodScheduled message holds %q; it is %q", name, holds, message)
		return message
	}

	pg := cluster.PodGroup("default", "huge-minres", 2)
	pg.Spec.MinResources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("64Gi")}
	_, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, h.CreatePods(h.Ctx, gangWithPriority("huge-minres", 2, "1", "high")...))
	message := messageOf("huge-minres-0", "preemption")
	assert.NotContains(t, message, "terminating", "no pod terminates")
	assert.Contains(t, message, "minResources", "the filters' reason stays")

	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "lost", CPU: "1", Memory: "1Gi", PriorityClassName: "high",
		Labels: map[string]string{flotillav1alpha1.QueueLabel: "ghost"}}))
	message = messageOf("lost", `queue "ghost" does not exist`)
	assert.NotContains(t, message, "no node has room", "room is not what is missing")
}

// Rule 3 with roles: a running gang of 1 leader + 10 workers, the workers'
// minimum 8 (minMember 9), one whole node each. A high-priority gang
// needing 2 nodes evicts exactly the 2 surplus workers, never the leader;
// one then needing 3 more evicts the whole gang (9 pods), never leaving a
// leader with 7 workers. Plain pods, not Jobs: a controller's replacements
// would take the freed nodes back between the two steps, and the test is
// of which pods preemption picks.
func TestRolesKeepTheirMinimumUnderPreemption(t *testing.T) {
	h := startPreemptionCluster(t, nodes(11, "8")...)
	pg := cluster.PodGroup("default", "lws", 9)
	pg.Annotations = map[string]string{flotillav1alpha1.RolesAnnotation: `[{"name": "leader", "minMember": 1}, {"name": "workers", "minMember": 8}]`}
	_, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	victims := gangWithPriority("lws", 11, "7", "low")
	for i := range victims {
		role := "workers"
		if i == 0 {
			role = "leader"
		}
		victims[i].Labels = map[string]string{flotillav1alpha1.RoleLabel: role}
	}
	require.NoError(t, h.CreatePods(h.Ctx, victims...))
	_, err = h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=lws", 11, bindTimeout)
	require.NoError(t, err)
	deleted := watchDeletions(t, h)

	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "urgent-a", 2))
	require.NoError(t, h.CreatePods(h.Ctx, gangWithPriority("urgent-a", 2, "7", "high")...))
	_, err = h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=urgent-a", 2, bindTimeout)
	require.NoError(t, err)
	taken := deleted.names("lws-")
	assert.Len(t, taken, 2, "the 2 surplus workers: %v", taken)
	assert.NotContains(t, taken, victims[0].Name, "the leader is its role's minimum")
	assert.Equal(t, 9, bound(t, h, "scheduling.x-k8s.io/pod-group=lws"))

	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "urgent-b", 3))
	require.NoError(t, h.CreatePods(h.Ctx, gangWithPriority("urgent-b", 3, "7", "high")...))
	_, err = h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=urgent-b", 3, bindTimeout)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(deleted.names("lws-")) == 11 }, bindTimeout, 100*time.Millisecond,
		"no surplus left: the whole gang goes, not 3 of its 9 (deleted %v)", deleted.names("lws-"))
	assert.Equal(t, 0, bound(t, h, "scheduling.x-k8s.io/pod-group=lws"))
	for _, group := range []string{"urgent-a", "urgent-b"} {
		assert.Zero(t, gangRejections(t, h, group), "gang %s, held by the cluster once room is made, is never given up", group)
	}
}

// Preemption plans room per role: a high-priority gang of a leader (cpu)
// and 3 workers (4 GPUs each, required in one NVLink clique) finds every
// GPU node held by a low-priority pod. The three cheapest victims (two in
// clique A, one in B) would free room the workers cannot use together;
// preemption takes all of clique A instead (cheaper than all of B), and
// the workers bind there, clique B untouched. The leader's shape differs
// from the workers': the plan must not evict for it where it fits already.
// Before, such a gang evicted nothing. Plain pods, not Jobs, as in the test
// above: a controller's replacements would race for the freed nodes.
// Once with GPUs from node allocatable, once from DRA devices behind a
// DeviceClass-backed extended resource (TestDRAPreemptionForAGangInOneRack
// covers claims from templates in a domain).
func TestPreemptionPlansRoomPerRole(t *testing.T) {
	t.Run("allocatable GPUs", func(t *testing.T) { preemptionPlansRoomPerRole(t, false) })
	t.Run("DRA GPUs", func(t *testing.T) { preemptionPlansRoomPerRole(t, true) })
}

// preemptionPlansRoomPerRole is TestPreemptionPlansRoomPerRole with GPUs
// from node allocatable or, with dra, from ResourceSlices behind a DeviceClass that
// backs the extended resource (the fillers then get their devices through
// the scheduler, so they are scheduled onto their nodes, not bound; the
// realistic substrate's controllers delete the evicted fillers' claims).
func preemptionPlansRoomPerRole(t *testing.T, dra bool) {
	gpu, gpus := cluster.GPU, map[corev1.ResourceName]string{cluster.GPU: "4"}
	if dra {
		gpu, gpus = draExtendedGPU, nil
	}
	specs := append(append([]cluster.NodeSpec{{Name: "cpu-0", CPU: "8", Memory: "32Gi"}},
		cliqueNodes("clique-a", 3, gpus)...), cliqueNodes("clique-b", 3, gpus)...)
	var h *harness.Harness
	if dra {
		h = startRealisticCluster(t, specs...)
		require.NoError(t, h.CreateDeviceClass(h.Ctx, draClassName, string(draExtendedGPU)))
		for _, n := range specs[1:] {
			require.NoError(t, h.PublishDevices(h.Ctx, n.Name, 4))
		}
		require.NoError(t, h.CreatePriorityClass(h.Ctx, "low", 10, false))
		require.NoError(t, h.CreatePriorityClass(h.Ctx, "high", 1000, false))
	} else {
		h = startPreemptionCluster(t, specs...)
	}
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "mid", 100, false))
	fillers := map[string]string{"clique-a-0": "low", "clique-a-1": "low", "clique-a-2": "mid", "clique-b-0": "low", "clique-b-1": "mid", "clique-b-2": "mid"}
	for node, priority := range fillers {
		spec := cluster.PodSpec{Name: "filler-" + node, CPU: "1", Memory: "2Gi", PriorityClassName: priority, Extended: map[corev1.ResourceName]string{gpu: "4"}}
		if !dra {
			spec.NodeName = node
			require.NoError(t, h.CreatePods(h.Ctx, spec))
			continue
		}
		pod := cluster.Pod(spec)
		pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := h.WaitForPodsBound(h.Ctx, "default", "", len(fillers), bindTimeout)
	require.NoError(t, err)
	deleted := watchDeletions(t, h)

	pg := cluster.PodGroup("default", "lws", 4)
	pg.Annotations = map[string]string{flotillav1alpha1.RolesAnnotation: `[{"name": "leader", "minMember": 1},
		{"name": "workers", "minMember": 3, "topologyRequired": "` + cluster.CliqueLabel + `"}]`}
	_, err = h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	members := gangWithPriority("lws", 4, "1", "high")
	for i := range members {
		members[i].Memory = "4Gi"
		members[i].Labels = map[string]string{flotillav1alpha1.RoleLabel: "workers"}
		members[i].Extended = map[corev1.ResourceName]string{gpu: "4"}
	}
	members[0].Labels[flotillav1alpha1.RoleLabel] = "leader"
	members[0].Extended = nil
	require.NoError(t, h.CreatePods(h.Ctx, members...))

	placed, err := h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=lws", 4, bindTimeout)
	require.NoError(t, err, "deleted so far: %v", deleted.names("filler-"))
	taken := deleted.names("filler-")
	sort.Strings(taken)
	why := map[string]string{}
	for _, name := range taken {
		for _, c := range deleted.get(name).Status.Conditions {
			if c.Type == corev1.DisruptionTarget {
				why[name] = c.Message
			}
		}
	}
	// On failure the harness prints the events and pods: the timeline.
	assert.Equal(t, []string{"filler-clique-a-0", "filler-clique-a-1", "filler-clique-a-2"}, taken, "evicted: %v", why)
	for pod, node := range placed {
		if pod != members[0].Name { // the leader goes wherever it fits
			assert.True(t, strings.HasPrefix(node, "clique-a-"), "worker %s on %s", pod, node)
		}
	}
	assert.Zero(t, gangRejections(t, h, "lws"), "a gang the cluster holds once room is made is never given up")
}
