package integration

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/test/harness"
)

const gangSelector = "scheduling.x-k8s.io/pod-group="

func nodes(n int, cpu string) []cluster.NodeSpec {
	specs := make([]cluster.NodeSpec, n)
	for i := range specs {
		specs[i] = cluster.NodeSpec{Name: fmt.Sprintf("node-%03d", i), CPU: cpu, Memory: "64Gi"}
	}
	return specs
}

// assertNoneBoundFor checks for a while that no member of the group gets a node.
func assertNoneBoundFor(t *testing.T, h *harness.Harness, group string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		bound, _, err := h.BoundMembers(h.Ctx, "default", group)
		require.NoError(t, err)
		require.Zero(t, bound, "gang %s has bound members", group)
		time.Sleep(100 * time.Millisecond)
	}
}

// 1. A gang of N that fits: all N bound, none before the quorum exists.
func TestGangThatFitsBindsWhole(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(2, "8")...)
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "train", 4))
	members := cluster.GangPods("default", "train", 4, "2")
	require.NoError(t, h.CreatePods(h.Ctx, members[:3]...))
	assertNoneBoundFor(t, h, "train", 2*time.Second)

	waits := metricValue(t, "flotilla_gang_wait_seconds", nil)
	require.NoError(t, h.CreatePods(h.Ctx, members[3]))
	_, err := h.WaitForPodsBound(h.Ctx, "default", gangSelector+"train", 4, bindTimeout)
	require.NoError(t, err)
	assert.Equal(t, waits+1, metricValue(t, "flotilla_gang_wait_seconds", nil), "one gang wait observed")
}

// 2. A gang of N with room for N-1: none bound, its reservations released
// at once, and the reason on the PodGroup. The members fit by resources and
// by what the plan judges of each (a node selector would be seen there),
// so the gang starts placing; one member's required pod affinity matches
// no pod, which the plan leaves to the member's own cycle.
//
// Run with the shipped feature gates and with NominatedNodeNameForExpectation
// on (Kubernetes' default, off in the shipped Deployment): the scheduler
// then writes a nominated node to every member waiting in Permit, and a
// rejected member must not keep it.
func TestGangWithoutRoomBindsNothingAndReleases(t *testing.T) {
	for name, flags := range map[string][]string{
		"shipped gates":                      nil,
		"NominatedNodeNameForExpectation on": {"--feature-gates=NominatedNodeNameForExpectation=true"},
	} {
		t.Run(name, func(t *testing.T) { gangWithoutRoomBindsNothingAndReleases(t, flags) })
	}
}

func gangWithoutRoomBindsNothingAndReleases(t *testing.T, flags []string) {
	h := harness.Start(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodes(4, "4")...))
	h.StartScheduler(shippedConfig(t, "scheduler-config.yaml"), cluster.SchedulerOptions{Flags: flags})
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "short", 4))
	members := cluster.GangPods("default", "short", 4, "4")
	pods := make([]*corev1.Pod, 0, 4)
	for i, spec := range members {
		p := cluster.Pod(spec)
		if i == 3 {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "none-such"}},
				TopologyKey:   corev1.LabelHostname,
			}}}}
		}
		pods = append(pods, p)
	}
	rejected := metricValue(t, "flotilla_gang_rejections_total", map[string]string{"reason": "member_unplaceable"})
	for _, p := range pods {
		_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	ev, err := h.WaitForEvent(h.Ctx, "default", "short", "GangRejected", bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, ev.Note, "short-3")
	assert.Greater(t, metricValue(t, "flotilla_gang_rejections_total", map[string]string{"reason": "member_unplaceable"}), rejected)
	assertNoneBoundFor(t, h, "short", 3*time.Second)
	// No member keeps a nominated node: it would hold that node for itself.
	err = wait.PollUntilContextTimeout(h.Ctx, 100*time.Millisecond, bindTimeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, err := h.Client.CoreV1().Pods("default").Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || got.Status.NominatedNodeName != "" {
				return false, err
			}
		}
		return true, nil
	})
	require.NoError(t, err, "a rejected member kept its nominated node")

	// Nothing holds the nodes: a pod needing a whole node still fits on each.
	for i := 0; i < 4; i++ {
		require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: fmt.Sprintf("whole-%d", i), CPU: "4", Labels: map[string]string{"app": "whole"}}))
	}
	_, err = h.WaitForPodsBound(h.Ctx, "default", "app=whole", 4, bindTimeout)
	require.NoError(t, err, "rejected gang still holds reservations")
}

// 3. Fragmentation: the free cpu adds up to twice the gang, but no node
// fits a member. Refused in PreFilter, before anything is reserved.
func TestFragmentedClusterRefusesGangInPreFilter(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(4, "4")...)
	for i := 0; i < 4; i++ {
		require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: fmt.Sprintf("filler-%d", i), NodeName: fmt.Sprintf("node-%03d", i), CPU: "1"}))
	}
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "frag", 2))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "frag", 2, "4")...))

	cond, err := h.WaitForPodUnschedulable(h.Ctx, "default", "frag-0", bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, cond.Message, "does not fit")
	ev, err := h.WaitForEvent(h.Ctx, "default", "frag", "GangDoesNotFit", bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, ev.Note, "0 of the 2 members")
	// The shortfall in numbers: 3 cpu left on each node, 12 in all.
	assert.Contains(t, ev.Note, "2 members have no node; the largest needs cpu 4")
	assert.Contains(t, ev.Note, "the most free on one node is cpu 3 on node node-00")
	assert.Contains(t, ev.Note, "12 on all 4 nodes")
	assertNoneBoundFor(t, h, "frag", time.Second)
}

// 5. minMember < replicas: the surplus schedules once the quorum is placed.
func TestSurplusMembersScheduleAfterQuorum(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(3, "4")...)
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "elastic", 2))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "elastic", 4, "4")...))
	err := wait.PollUntilContextTimeout(h.Ctx, 100*time.Millisecond, bindTimeout, true, func(context.Context) (bool, error) {
		bound, _, err := h.BoundMembers(h.Ctx, "default", "elastic")
		return bound == 3, err
	})
	require.NoError(t, err, "quorum of 2 plus one surplus member should bind on 3 nodes")
	_, err = h.WaitForPodUnschedulable(h.Ctx, "default", "elastic-3", bindTimeout)
	if err != nil {
		// Whichever member did not fit reports it.
		pods, _ := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{LabelSelector: gangSelector + "elastic"})
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				_, err = h.WaitForPodUnschedulable(h.Ctx, "default", p.Name, bindTimeout)
			}
		}
	}
	require.NoError(t, err)
}

// 6. PodGroup created after its pods: they wait, then schedule.
func TestPodGroupCreatedAfterItsPods(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(2, "8")...)
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "late", 3, "2")...))
	assertNoneBoundFor(t, h, "late", 2*time.Second)
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "late", 3))
	_, err := h.WaitForPodsBound(h.Ctx, "default", gangSelector+"late", 3, bindTimeout)
	require.NoError(t, err)
}

// A member created already bound (spec.nodeName set, as a controller that
// places its own pods does) completes its gang's count: the members held
// at PreEnqueue for it are let in. The scheduling queue does not report
// an assigned pod to Gang (bindings would cost a hint run per gated
// member), so the store's informer does (OnMemberCounted); the gang's
// status writes do not wake its members.
func TestMemberArrivingBoundWakesItsGang(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(2, "8")...)
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "prebound", 3))
	members := cluster.GangPods("default", "prebound", 3, "2")
	require.NoError(t, h.CreatePods(h.Ctx, members[:2]...))
	_, err := h.WaitForEvent(h.Ctx, "default", members[0].Name, string(reasons.WaitingForMembers), bindTimeout)
	require.NoError(t, err, "held at PreEnqueue for its third member")
	members[2].NodeName = "node-000"
	require.NoError(t, h.CreatePods(h.Ctx, members[2]))
	_, err = h.WaitForPodsBound(h.Ctx, "default", gangSelector+"prebound", 3, bindTimeout)
	require.NoError(t, err)
}

// 7. What the Kubeflow training operator creates for a PyTorchJob with
// scheduler-plugins gang scheduling, unchanged but schedulerName.
const pytorchJobObjects = `
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata:
  name: pytorch-mnist
  namespace: default
  ownerReferences:
  - apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    name: pytorch-mnist
    uid: 6f0d5c9e-1111-4c55-9d3b-000000000001
    controller: true
spec:
  minMember: 3
  scheduleTimeoutSeconds: 30
  minResources:
    cpu: "3"
    memory: 3Gi
`

func pytorchPod(name, role, index string) string {
	return `
apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: default
  labels:
    scheduling.x-k8s.io/pod-group: pytorch-mnist
    training.kubeflow.org/job-name: pytorch-mnist
    training.kubeflow.org/operator-name: pytorchjob-controller
    training.kubeflow.org/replica-type: ` + role + `
    training.kubeflow.org/replica-index: "` + index + `"
  ownerReferences:
  - apiVersion: kubeflow.org/v1
    kind: PyTorchJob
    name: pytorch-mnist
    uid: 6f0d5c9e-1111-4c55-9d3b-000000000001
    controller: true
    blockOwnerDeletion: true
spec:
  schedulerName: flotilla-scheduler
  restartPolicy: OnFailure
  containers:
  - name: pytorch
    image: docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727
    command: ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"]
    env:
    - {name: MASTER_PORT, value: "23456"}
    - {name: MASTER_ADDR, value: pytorch-mnist-master-0}
    - {name: WORLD_SIZE, value: "3"}
    - {name: RANK, value: "` + index + `"}
    ports:
    - {name: pytorchjob-port, containerPort: 23456}
    resources:
      requests: {cpu: "1", memory: 1Gi}
      limits: {cpu: "1", memory: 1Gi}
`
}

func TestKubeflowPyTorchJobSchedules(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(2, "4")...)
	objects := pytorchJobObjects + "---" + pytorchPod("pytorch-mnist-master-0", "master", "0") +
		"---" + pytorchPod("pytorch-mnist-worker-0", "worker", "1") + "---" + pytorchPod("pytorch-mnist-worker-1", "worker", "2")
	_, err := h.Apply(h.Ctx, []byte(objects))
	require.NoError(t, err)
	_, err = h.WaitForPodsBound(h.Ctx, "default", gangSelector+"pytorch-mnist", 3, bindTimeout)
	require.NoError(t, err)
}

// 9. PodGroup status follows the gang's life.
// With one profile, with the shipped replace-default configuration and
// with two flotilla profiles that both schedule gangs, each change of a
// PodGroup's status is written once: Gang's status writer exists once per
// scheduler, not once per profile that runs it.
func TestPodGroupStatusFollowsTheGang(t *testing.T) {
	for name, config := range map[string][]byte{
		"scheduler-config.yaml":                 shippedConfig(t, "scheduler-config.yaml"),
		"scheduler-config-replace-default.yaml": shippedConfig(t, "scheduler-config-replace-default.yaml"),
		"two flotilla profiles":                 twoFlotillaProfiles(t),
	} {
		t.Run(name, func(t *testing.T) { podGroupStatusFollowsTheGang(t, config) })
	}
}

// secondProfile is the name of the copy twoFlotillaProfiles makes.
const secondProfile = "flotilla-gpu"

// twoFlotillaProfiles is the shipped configuration with its profile
// copied under another name, as a platform team tuning a second profile
// would write it.
func twoFlotillaProfiles(t *testing.T) []byte {
	var cfg map[string]interface{}
	require.NoError(t, yaml.Unmarshal(shippedConfig(t, "scheduler-config.yaml"), &cfg))
	profiles := cfg["profiles"].([]interface{})
	second := runtime.DeepCopyJSONValue(profiles[0]).(map[string]interface{})
	second["schedulerName"] = secondProfile
	cfg["profiles"] = append(profiles, second)
	data, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	return data
}

func podGroupStatusFollowsTheGang(t *testing.T, config []byte) {
	h := harness.Start(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodes(2, "8")...))
	h.StartScheduler(config, cluster.SchedulerOptions{})
	changes := countStatusChanges(t, h)
	writesBefore := metricValue(t, "flotilla_podgroup_status_writes_total", nil)
	listsBefore := metricValue(t, "flotilla_podgroup_member_lists_total", nil)
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "life", 2))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "life", 2, "2")...))
	// A same-named group elsewhere must not be counted.
	require.NoError(t, h.CreateNamespace(h.Ctx, "other"))
	require.NoError(t, h.CreatePodGroup(h.Ctx, "other", "life", 5))
	others := cluster.GangPods("other", "life", 5, "100")
	if bytes.Contains(config, []byte(secondProfile)) {
		for i := range others { // both profiles schedule gangs
			others[i].SchedulerName = secondProfile
		}
	}
	require.NoError(t, h.CreatePods(h.Ctx, others...))

	_, err := h.WaitForPodsBound(h.Ctx, "default", gangSelector+"life", 2, bindTimeout)
	require.NoError(t, err)
	waitForPhase(t, h, "life", "Scheduled", 0, 0)
	pg, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Get(h.Ctx, "life", metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, pg.Status.ScheduleStartTime.IsZero())

	for _, p := range []string{"life-0", "life-1"} {
		require.NoError(t, h.SetPodPhase(h.Ctx, "default", p, corev1.PodRunning))
	}
	waitForPhase(t, h, "life", schedv1alpha1.PodGroupRunning, 2, 0)
	for _, p := range []string{"life-0", "life-1"} {
		require.NoError(t, h.SetPodPhase(h.Ctx, "default", p, corev1.PodSucceeded))
	}
	waitForPhase(t, h, "life", schedv1alpha1.PodGroupFinished, 0, 2)

	// Let writes in flight land, then compare. A write can find its own
	// previous one not yet in its informer and patch what is already there
	// (a no-op the watch does not see): one such is tolerated; a second
	// writer would double the count.
	time.Sleep(2 * time.Second)
	writes := metricValue(t, "flotilla_podgroup_status_writes_total", nil) - writesBefore
	seen := changes()
	require.GreaterOrEqual(t, seen, 4, "pending, scheduling or scheduled, running, finished")
	t.Logf("%v status writes for %d status changes", writes, seen)
	assert.LessOrEqual(t, writes, float64(seen+1), "status writes %v for %d status changes", writes, seen)
	// A member that fails leaves the pod informer as one that succeeds
	// does; the failed members' informer shows it, and the status counts
	// it. A leader unlike its worker.
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "broken", 2))
	leader := cluster.GangPods("default", "broken", 1, "3")[0]
	leader.Name = "broken-leader"
	worker := cluster.GangPods("default", "broken", 1, "1")[0]
	worker.Name = "broken-worker"
	require.NoError(t, h.CreatePods(h.Ctx, leader, worker))
	_, err = h.WaitForPodsBound(h.Ctx, "default", gangSelector+"broken", 2, bindTimeout)
	require.NoError(t, err)
	for _, p := range []string{"broken-leader", "broken-worker"} {
		require.NoError(t, h.SetPodPhase(h.Ctx, "default", p, corev1.PodRunning))
	}
	waitForPhase(t, h, "broken", schedv1alpha1.PodGroupRunning, 2, 0)
	require.NoError(t, h.SetPodPhase(h.Ctx, "default", "broken-worker", corev1.PodFailed))
	err = cluster.Poll(h.Ctx, 100*time.Millisecond, bindTimeout, func(ctx context.Context) (bool, string, error) {
		pg, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Get(ctx, "broken", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return pg.Status.Phase == schedv1alpha1.PodGroupFailed && pg.Status.Running == 1 && pg.Status.Failed == 1, fmt.Sprintf("status %+v", pg.Status), nil
	})
	require.NoError(t, err, "PodGroup broken: want phase Failed, running 1, failed 1")
	// Every status was counted from the informers: each member that
	// finished was shown by the succeeded or failed members' informer
	// well within the grace a write waits for it.
	assert.Zero(t, metricValue(t, "flotilla_podgroup_member_lists_total", nil)-listsBefore, "lists of the groups' pods")
}

// countStatusChanges watches every PodGroup and returns a function that
// says how many times a status changed so far.
func countStatusChanges(t *testing.T, h *harness.Harness) func() int {
	t.Helper()
	w, err := h.PodGroups.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).Watch(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var changes int
	last := map[string]schedv1alpha1.PodGroupStatus{}
	go func() {
		for e := range w.ResultChan() {
			pg, ok := e.Object.(*schedv1alpha1.PodGroup)
			if !ok {
				continue
			}
			key := pg.Namespace + "/" + pg.Name
			mu.Lock()
			if prev, known := last[key]; known && !apiequality.Semantic.DeepEqual(prev, pg.Status) {
				changes++
			}
			last[key] = pg.Status
			mu.Unlock()
		}
	}()
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return changes
	}
}

func waitForPhase(t *testing.T, h *harness.Harness, name string, phase schedv1alpha1.PodGroupPhase, running, succeeded int32) {
	t.Helper()
	err := cluster.Poll(h.Ctx, 100*time.Millisecond, bindTimeout, func(ctx context.Context) (bool, string, error) {
		pg, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return pg.Status.Phase == phase && pg.Status.Running == running && pg.Status.Succeeded == succeeded, fmt.Sprintf("status %+v", pg.Status), nil
	})
	require.NoError(t, err, "PodGroup %s: want phase %s running %d succeeded %d", name, phase, running, succeeded)
}

// 4. Contention: 20 gangs, each needing 40% of the cluster, created at once;
// each is deleted a second after it is fully bound. Every gang completes and
// no gang is ever seen partly bound for long.
func TestContendingGangsAllComplete(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(10, "4")...)
	const gangs, size = 20, 4 // 4 x 4 cpu = 16 of 40 cpu
	for i := 0; i < gangs; i++ {
		name := fmt.Sprintf("g%02d", i)
		require.NoError(t, h.CreatePodGroup(h.Ctx, "default", name, size))
		require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", name, size, "4")...))
	}
	done := map[string]bool{}
	partialSince := map[string]time.Time{}
	deadline := time.Now().Add(3 * time.Minute)
	for len(done) < gangs && time.Now().Before(deadline) {
		pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{})
		require.NoError(t, err)
		bound := map[string]int{}
		for _, p := range pods.Items {
			if g := p.Labels[schedv1alpha1.PodGroupLabel]; g != "" && p.Spec.NodeName != "" {
				bound[g]++
			}
		}
		for g, n := range bound {
			switch {
			case n == size:
				delete(partialSince, g)
				if !done[g] {
					done[g] = true
					go func(g string) {
						time.Sleep(time.Second)
						_ = h.Client.CoreV1().Pods("default").DeleteCollection(h.Ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
							metav1.ListOptions{LabelSelector: gangSelector + g})
					}(g)
				}
			case n > 0 && !done[g]:
				if _, ok := partialSince[g]; !ok {
					partialSince[g] = time.Now()
				}
				require.Less(t, time.Since(partialSince[g]), 5*time.Second, "gang %s stuck with %d of %d bound", g, n, size)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	var missing []string
	for i := 0; i < gangs; i++ {
		if name := fmt.Sprintf("g%02d", i); !done[name] {
			missing = append(missing, name)
		}
	}
	require.Empty(t, missing, "gangs never fully bound: %s", strings.Join(missing, ", "))
}

// 8. A 200-pod gang on 200 nodes binds completely.
func TestLargeGangBindsCompletely(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(200, "2")...)
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "big", 200))
	start := time.Now()
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "big", 200, "2")...))
	created := time.Now()
	_, err := h.WaitForPodsBound(h.Ctx, "default", gangSelector+"big", 200, 2*time.Minute)
	require.NoError(t, err)
	t.Logf("200-pod gang: created in %s, all bound %s after the last pod existed", created.Sub(start).Round(time.Millisecond), time.Since(created).Round(time.Millisecond))
}

// A gang whose members cannot all be placed within scheduleTimeoutSeconds
// is released when the wait times out, and the PodGroup says so. The last
// member exists but is kept out of scheduling by a scheduling gate.
func TestGangTimesOutAndSaysSo(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(2, "8")...)
	pg := cluster.PodGroup("default", "slow", 3)
	timeout := int32(2)
	pg.Spec.ScheduleTimeoutSeconds = &timeout
	_, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
	waiting := time.Now()
	members := cluster.GangPods("default", "slow", 3, "1")
	require.NoError(t, h.CreatePods(h.Ctx, members[:2]...))
	gated := cluster.Pod(members[2])
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	_, err = h.Client.CoreV1().Pods("default").Create(h.Ctx, gated, metav1.CreateOptions{})
	require.NoError(t, err)

	ev, err := h.WaitForEvent(h.Ctx, "default", "slow", "GangRejected", bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, ev.Note, "timed out after 2s")
	assert.GreaterOrEqual(t, time.Since(waiting), 2*time.Second)
	assertNoneBoundFor(t, h, "slow", time.Second)
}

// The binding backlog paces gangs (maxMembersInFlight, here 2): while the
// two placed members of gang slow wait in Permit for their third, a 4-member
// gang does not start and says WaitingForBindings; once the third member is
// let in, both gangs bind — the larger one though it exceeds the limit — and
// the backlog drains to 0, so a later gang starts at once. A scheduling gate
// on slow's third member is the idealization: it keeps the backlog full for
// as long as the test needs (a Job's pods bind within milliseconds here).
func TestGangsWaitForTheBindingBacklog(t *testing.T) {
	shipped := shippedConfig(t, "scheduler-config.yaml")
	config := bytes.Replace(shipped, []byte("maxMembersInFlight: 96"), []byte("maxMembersInFlight: 2"), 1)
	require.NotEqual(t, shipped, config, "the shipped configuration sets maxMembersInFlight")
	h := harness.Start(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodes(2, "8")...))
	h.StartScheduler(config, cluster.SchedulerOptions{})
	inFlight := func() float64 { return metricValue(t, "flotilla_gang_members_in_flight", nil) }

	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "slow", 3))
	slow := cluster.GangPods("default", "slow", 3, "1")
	require.NoError(t, h.CreatePods(h.Ctx, slow[:2]...))
	gated := cluster.Pod(slow[2])
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, gated, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return inFlight() == 2 }, bindTimeout, 50*time.Millisecond, "slow's two members wait in Permit")

	paced := metricValue(t, "flotilla_gang_attempts_paced_total", nil)
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "next", 4))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "next", 4, "1")...))
	require.Eventually(t, func() bool { return waitingReason(t, h, "next") == string(reasons.WaitingForBindings) }, bindTimeout, 100*time.Millisecond,
		"PodGroup next says %q", waitingReason(t, h, "next"))
	assert.Contains(t, podGroupAnnotations(t, h, "next")[flotillav1alpha1.WaitingMessageAnnotation], "2 or more members of gangs are placed and not yet bound (maxMembersInFlight)")
	assertNoneBoundFor(t, h, "next", 2*time.Second)
	assert.Greater(t, metricValue(t, "flotilla_gang_attempts_paced_total", nil), paced)

	pod, err := h.Client.CoreV1().Pods("default").Get(h.Ctx, "slow-2", metav1.GetOptions{})
	require.NoError(t, err)
	pod.Spec.SchedulingGates = nil
	_, err = h.Client.CoreV1().Pods("default").Update(h.Ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = h.WaitForPodsBound(h.Ctx, "default", gangSelector+"slow", 3, bindTimeout)
	require.NoError(t, err)
	_, err = h.WaitForPodsBound(h.Ctx, "default", gangSelector+"next", 4, bindTimeout)
	require.NoError(t, err, "the held gang starts once the backlog drains, though larger than the limit")
	require.Eventually(t, func() bool { return inFlight() == 0 }, bindTimeout, 50*time.Millisecond, "no member is left counted in flight")

	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "later", 2))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "later", 2, "1")...))
	_, err = h.WaitForPodsBound(h.Ctx, "default", gangSelector+"later", 2, bindTimeout)
	require.NoError(t, err)
}

// Pods of a gang that cannot start say why on themselves, not only in logs.
func TestGatedMembersSayWhy(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(1, "8")...)
	// No PodGroup at all.
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "ghost", 1, "1")...))
	ev, err := h.WaitForEvent(h.Ctx, "default", "ghost-0", "WaitingForPodGroup", bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, ev.Note, "waiting for PodGroup default/ghost to be created")

	// minMember larger than the pods that exist.
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "few", 3))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "few", 2, "1")...))
	ev, err = h.WaitForEvent(h.Ctx, "default", "few-0", "WaitingForMembers", bindTimeout)
	require.NoError(t, err)
	assert.Regexp(t, `has [12] of its minMember 3 pods`, ev.Note)
	_, err = h.WaitForEvent(h.Ctx, "default", "few", "WaitingForMembers", bindTimeout)
	require.NoError(t, err, "the PodGroup says so too")

	// minMember omitted (0): the schema's minimum does not apply to an
	// absent field, so the scheduler refuses it itself.
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "zero", 0))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "zero", 1, "1")...))
	ev, err = h.WaitForEvent(h.Ctx, "default", "zero-0", string(reasons.InvalidSpec), bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, ev.Note, "minMember 0; it must be at least 1")

	// A negative minMember never gets in: the CRD schema names the field.
	pg := cluster.PodGroup("default", "negative", -2)
	_, err = h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.minMember")
	assertNoneBoundFor(t, h, "few", time.Second)
}

// A member whose binding fails after the quorum was allowed (here a
// ValidatingAdmissionPolicy rejects it) is unreserved and retried; the
// failure does not cascade to its bound siblings, and once the cause is gone
// the gang completes.
func TestFailedBindingIsRetriedUntilTheGangCompletes(t *testing.T) {
	h := startCluster(t, "scheduler-config.yaml", nodes(2, "8")...)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-binding"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != 'flaky-2'", Message: "injected binding failure"}},
		},
	}
	_, err := h.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(h.Ctx, policy, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(h.Ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-binding"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: "refuse-binding", ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The policy is enforced once the apiserver has compiled it.
	require.Eventually(t, func() bool {
		probe := cluster.Pod(cluster.PodSpec{Name: "flaky-2", SchedulerName: "nobody"})
		if _, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, probe, metav1.CreateOptions{}); err != nil {
			return false
		}
		defer h.Client.CoreV1().Pods("default").Delete(h.Ctx, "flaky-2", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		err := h.Client.CoreV1().Pods("default").Bind(h.Ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "flaky-2"}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-000"}}, metav1.CreateOptions{})
		return err != nil && strings.Contains(err.Error(), "injected binding failure")
	}, bindTimeout, 200*time.Millisecond)
	require.Eventually(t, func() bool {
		_, err := h.Client.CoreV1().Pods("default").Get(h.Ctx, "flaky-2", metav1.GetOptions{})
		return err != nil
	}, bindTimeout, 100*time.Millisecond)

	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "flaky", 3))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.GangPods("default", "flaky", 3, "1")...))
	ev, err := h.WaitForEvent(h.Ctx, "default", "flaky-2", "FailedScheduling", bindTimeout)
	require.NoError(t, err)
	assert.Contains(t, ev.Note, "injected binding failure")
	for _, p := range []string{"flaky-0", "flaky-1"} {
		_, err := h.WaitForPodBound(h.Ctx, "default", p, bindTimeout)
		require.NoError(t, err, "the siblings' bindings succeeded and stay")
	}

	require.NoError(t, h.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(h.Ctx, "refuse-binding", metav1.DeleteOptions{}))
	_, err = h.WaitForPodsBound(h.Ctx, "default", gangSelector+"flaky", 3, time.Minute)
	require.NoError(t, err, "the failed member is retried and the gang completes")
}
