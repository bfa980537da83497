package integration

import (
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// The scenario suite: realistic workloads (Jobs with PodGroups, a
// Deployment) on simulated kubelets under the real controllers, with
// arrivals, completions and failures interleaved; startScenario checks the
// invariants each test lists (placementInvariants, and more where the
// scenario promises more) the whole time. The checker is invariants_test.go.

func startScenarioCluster(t *testing.T, checks []invariant, nodes ...cluster.NodeSpec) (*harness.Harness, *scenario) {
	t.Helper()
	h := startRealisticCluster(t, nodes...)
	return h, startScenario(t, h, checks...)
}

// startRealisticCluster starts the realistic substrate with the nodes and
// the shipped flotilla-scheduler.
func startRealisticCluster(t *testing.T, nodes ...cluster.NodeSpec) *harness.Harness {
	t.Helper()
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodes...))
	h.StartScheduler(shippedConfig(t, "scheduler-config.yaml"), cluster.SchedulerOptions{})
	return h
}

func nodeSpecs(prefix string, n int, spec cluster.NodeSpec) []cluster.NodeSpec {
	out := make([]cluster.NodeSpec, n)
	for i := range out {
		out[i] = spec
		out[i].Name = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

// waitRunning waits until n members of the Job run and returns them.
func (s *scenario) waitRunning(job *batchv1.Job, n int, what string) []corev1.Pod {
	s.t.Helper()
	var running []corev1.Pod
	require.Eventually(s.t, func() bool {
		running = runningMembers(s.t, s.h, job)
		return len(running) == n
	}, 60*time.Second, 250*time.Millisecond, "%s\n%s", what, s.tl)
	return running
}

// runningMembers lists the running pods of a Job.
func runningMembers(t *testing.T, h *harness.Harness, job *batchv1.Job) []corev1.Pod {
	t.Helper()
	list, err := h.Client.CoreV1().Pods(job.Namespace).List(h.Ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	require.NoError(t, err)
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// Member failures: pods of running gangs fail with exit code 1 at random
// moments; the Job controller replaces them after its back-off, whatever
// their siblings are doing by then. Every Job completes within its
// backoffLimit and every PodGroup reaches Finished.
func TestScenarioMemberFailures(t *testing.T) {
	h, s := startScenarioCluster(t, placementInvariants, nodeSpecs("node", 12, cluster.NodeSpec{CPU: "8", Memory: "32Gi"})...)
	rng := rand.New(rand.NewSource(1))
	var jobs []*batchv1.Job
	for i := 0; i < 6; i++ {
		size := int32(4 + rng.Intn(5))
		jobs = append(jobs, s.gangJob(cluster.WorkloadSpec{Name: fmt.Sprintf("train-%d", i), Replicas: size, CPU: "3", Memory: "4Gi",
			RunSeconds: float64(8 + rng.Intn(8))}, size))
	}
	// For 20 s, fail one running member of a random Job every second, at
	// most 2 per Job (backoffLimit is 6).
	failures := map[string]int{}
	total := 0
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		job := jobs[rng.Intn(len(jobs))]
		if failures[job.Name] >= 2 {
			continue
		}
		running := runningMembers(t, h, job)
		if len(running) == 0 {
			continue
		}
		victim := running[rng.Intn(len(running))]
		if err := h.EndPod(h.Ctx, victim.Namespace, victim.Name, 1); err != nil {
			continue // it finished meanwhile
		}
		s.tl.add("failed %s of %s", victim.Name, job.Name)
		failures[job.Name]++
		total++
	}
	require.GreaterOrEqual(t, total, 6, "failures injected into running gangs\n%s", s.tl)
	s.waitJobs(2*time.Minute, jobs...)
	s.waitPodGroupsFinished(15 * time.Second)
}

// Node failure: the kubelet of a node running gang members dies (its
// Lease stops); the node lifecycle controller marks it unreachable and
// evicts its pods, which stay Terminating on the dead node; the Job
// replaces them; the replacements are placed on the nodes left, all or
// nothing, and the Job completes.
func TestScenarioNodeFailure(t *testing.T) {
	h, s := startScenarioCluster(t, placementInvariants, nodeSpecs("node", 10, cluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	job := s.gangJob(cluster.WorkloadSpec{Name: "train", Replicas: 8, CPU: "3", Memory: "4Gi", RunSeconds: 20}, 8)
	running := s.waitRunning(job, 8, "the gang runs")
	dead := running[0].Spec.NodeName
	require.NoError(t, h.StopKubelet(h.Ctx, dead))
	s.tl.add("kubelet of %s stopped (runs %s)", dead, running[0].Name)

	// Its pod is evicted: the taint manager deletes it once the node is
	// unreachable.
	require.Eventually(t, func() bool {
		p, err := h.Client.CoreV1().Pods(job.Namespace).Get(h.Ctx, running[0].Name, metav1.GetOptions{})
		return err != nil || p.DeletionTimestamp != nil
	}, 60*time.Second, 250*time.Millisecond, "the dead node's pod is evicted\n%s", s.tl)
	s.tl.add("%s evicted", running[0].Name)
	s.waitJobs(2*time.Minute, job)
	s.waitPodGroupsFinished(15 * time.Second)
	list, err := h.Client.CoreV1().Pods(job.Namespace).List(h.Ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + dead})
	require.NoError(t, err)
	for _, p := range list.Items {
		require.Equal(t, running[0].UID, p.UID, "nothing new was placed on the dead node")
	}
}

// Elastic gang: minMember 4 of 8 pods on room for 6 at a time: the quorum
// binds together, the surplus follows as room allows, and a surplus
// member's failure disturbs nobody: no other member is evicted or
// rejected, its replacement runs as surplus, the Job completes.
func TestScenarioElasticGang(t *testing.T) {
	h, s := startScenarioCluster(t, placementInvariants, nodeSpecs("node", 6, cluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)
	deleted := watchDeletedPods(t, h, metav1.NamespaceDefault)
	job := s.gangJob(cluster.WorkloadSpec{Name: "elastic", Replicas: 8, CPU: "3", Memory: "4Gi", RunSeconds: 8}, 4)
	running := s.waitRunning(job, 6, "quorum and surplus run on the room there is")
	// Any member above the quorum is surplus; fail the newest.
	newest := running[0]
	for _, p := range running {
		if p.CreationTimestamp.After(newest.CreationTimestamp.Time) {
			newest = p
		}
	}
	require.NoError(t, h.EndPod(h.Ctx, newest.Namespace, newest.Name, 1))
	s.tl.add("failed surplus member %s", newest.Name)
	require.Eventually(t, func() bool { return len(runningMembers(t, h, job)) == 5 || len(runningMembers(t, h, job)) == 6 }, 5*time.Second, 100*time.Millisecond)
	for _, p := range running {
		if p.Name != newest.Name {
			require.False(t, deleted.has(p.Name), "member %s was deleted after a surplus member failed\n%s", p.Name, s.tl)
		}
	}
	s.waitJobs(2*time.Minute, job)
	s.waitPodGroupsFinished(15 * time.Second)
	require.Empty(t, deleted.all(), "no member of the elastic gang was ever evicted or deleted")
}

// Mixed batch day: three queues (weights 1:2:3; one with a guarantee, one
// under a parent) on CPU and 8-GPU nodes; Jobs of 1-16 pods with
// PodGroups, cpu+memory (+GPU) requests, run times 2-10 s, arriving in
// waves; a Deployment of plain pods alongside. Every Job completes, the
// invariants hold throughout, and when all Jobs are done every Queue's
// allocation is zero and every PodGroup is Finished.
func TestScenarioMixedBatchDay(t *testing.T) {
	nodes := append(nodeSpecs("cpu", 8, cluster.NodeSpec{CPU: "16", Memory: "64Gi"}),
		nodeSpecs("gpu", 2, cluster.NodeSpec{CPU: "64", Memory: "512Gi", Extended: map[corev1.ResourceName]string{cluster.GPU: "8"}})...)
	// Each queue reaches its deserved share, to within its smallest
	// waiting gang, within 10 s of a change of demand (the Queue status
	// it is read from is written every few hundred ms).
	h, s := startScenarioCluster(t, append(placementInvariants, invariant{kind: placedWithinShare, within: 10 * time.Second}), nodes...)
	team := cluster.Queue("team", 1, "")
	research := cluster.Queue("research", 1, "")
	research.Spec.Guarantee = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16")}
	prod := cluster.Queue("prod", 3, "")
	dev := cluster.Queue("dev", 2, "team")
	for _, q := range []*flotillav1alpha1.Queue{team, research, prod, dev} {
		require.NoError(t, h.CreateQueue(h.Ctx, q))
	}
	_, err := h.CreateDeployment(h.Ctx, cluster.WorkloadSpec{Name: "web", Replicas: 6, CPU: "500m", Memory: "512Mi"})
	require.NoError(t, err)

	rng := rand.New(rand.NewSource(7))
	queues := []string{"research", "prod", "dev"}
	var jobs []*batchv1.Job
	for wave := 0; wave < 4; wave++ {
		for i := 0; i < 5; i++ {
			size := int32(1 + rng.Intn(16))
			spec := cluster.WorkloadSpec{Name: fmt.Sprintf("w%d-j%d", wave, i), Replicas: size, CPU: fmt.Sprint(1 + rng.Intn(3)), Memory: fmt.Sprintf("%dGi", 1+rng.Intn(4)),
				Queue: queues[rng.Intn(len(queues))], RunSeconds: float64(2 + rng.Intn(9)), IgnoreDisruptions: true, Indexed: i%2 == 0}
			if rng.Intn(4) == 0 {
				spec.Replicas, spec.CPU, spec.Memory, spec.GPU = int32(1+rng.Intn(4)), "6", "48Gi", fmt.Sprint(1+rng.Intn(2))
			}
			jobs = append(jobs, s.gangJob(spec, spec.Replicas))
		}
		s.tl.add("wave %d submitted", wave)
		time.Sleep(4 * time.Second)
	}
	s.waitJobs(3*time.Minute, jobs...)
	s.waitPodGroupsFinished(15 * time.Second)
	require.Eventually(t, func() bool {
		for _, q := range []string{"research", "prod", "dev", "team"} {
			queue, err := h.GetQueue(h.Ctx, q)
			if err != nil {
				return false
			}
			for _, v := range queue.Status.Allocated {
				if !v.IsZero() {
					return false
				}
			}
		}
		return true
	}, 15*time.Second, 250*time.Millisecond, "every Queue's allocation is zero once its Jobs are done\n%s", s.tl)
}

// deletedPods remembers the pods of a namespace that were deleted or
// marked for deletion.
type deletedPods struct {
	mu    sync.Mutex
	names map[string]bool
}

func watchDeletedPods(t *testing.T, h *harness.Harness, namespace string) *deletedPods {
	t.Helper()
	w, err := h.Client.CoreV1().Pods(namespace).Watch(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	d := &deletedPods{names: map[string]bool{}}
	go func() {
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			// A pod that finished is deleted by nobody; one that is
			// deleted before it finished was evicted or preempted.
			if (ev.Type == watch.Deleted || pod.DeletionTimestamp != nil) && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
				d.mu.Lock()
				d.names[pod.Name] = true
				d.mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.Stop)
	return d
}

func (d *deletedPods) has(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.names[name]
}

func (d *deletedPods) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for n := range d.names {
		out = append(out, n)
	}
	return out
}

// Restart: the scheduler binary is SIGKILLed twice while gang Jobs arrive,
// run, fail and finish, and a new one takes over each time; the invariants
// hold throughout (nothing half-placed survives the crash past its
// timeout, nothing is bound twice), every Job completes and every
// PodGroup is Finished.
func TestScenarioRestart(t *testing.T) {
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodeSpecs("node", 10, cluster.NodeSpec{CPU: "8", Memory: "32Gi"})...))
	config := shippedConfig(t, "scheduler-config.yaml")
	start := func() *cluster.SchedulerProcess {
		p, err := h.StartSchedulerProcess(h.Ctx, config, "--leader-elect=false")
		require.NoError(t, err)
		return p
	}
	scheduler := start()
	s := startScenario(t, h, placementInvariants...)
	rng := rand.New(rand.NewSource(3))
	var jobs []*batchv1.Job
	submit := func(wave int) {
		for i := 0; i < 4; i++ {
			size := int32(2 + rng.Intn(6))
			jobs = append(jobs, s.gangJob(cluster.WorkloadSpec{Name: fmt.Sprintf("w%d-j%d", wave, i), Replicas: size, CPU: "3", Memory: "4Gi",
				RunSeconds: float64(3 + rng.Intn(5))}, size))
		}
	}
	for wave := 0; wave < 3; wave++ {
		submit(wave)
		time.Sleep(time.Duration(1500+rng.Intn(1500)) * time.Millisecond)
		if wave < 2 {
			require.NoError(t, scheduler.Kill())
			s.tl.add("scheduler SIGKILLed")
			scheduler = start()
		}
	}
	// One member of a running gang fails after the restarts.
	for _, job := range jobs {
		if running := runningMembers(t, h, job); len(running) > 0 {
			require.NoError(t, h.EndPod(h.Ctx, running[0].Namespace, running[0].Name, 1))
			s.tl.add("failed %s", running[0].Name)
			break
		}
	}
	s.waitJobs(2*time.Minute, jobs...)
	s.waitPodGroupsFinished(15 * time.Second)
}

// Preemption under load: low-priority elastic gangs (minMember 3 of 4)
// of queue "batch" fill the cluster; a high-priority gang Job arrives in
// queue "urgent", below its share. It takes room from surplus members or
// whole gangs only: no batch gang is ever left with 0 < running <
// minMember. Evicted pods do not count against their Jobs' backoffLimit
// (pod failure policy), their Jobs re-create them, and every Job finishes.
func TestScenarioPreemptionUnderLoad(t *testing.T) {
	// Members leave only by preemption here, which takes surplus members
	// or whole gangs: a gang is never left short of its quorum.
	h, s := startScenarioCluster(t, append(placementInvariants, invariant{kind: gangsStayWhole, within: 3 * time.Second}),
		nodeSpecs("node", 8, cluster.NodeSpec{CPU: "8", Memory: "32Gi"})...)
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "low", 10, false))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "high", 1000, false))
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("batch", 1, "")))
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("urgent", 1, "")))
	deleted := watchDeletedPods(t, h, metav1.NamespaceDefault)
	var jobs []*batchv1.Job
	for i := 0; i < 4; i++ {
		jobs = append(jobs, s.gangJob(cluster.WorkloadSpec{Name: fmt.Sprintf("batch-%d", i), Replicas: 4, CPU: "4", Memory: "4Gi",
			Queue: "batch", PriorityClassName: "low", RunSeconds: 25, IgnoreDisruptions: true}, 3))
	}
	require.Eventually(t, func() bool {
		running := 0
		for _, j := range jobs {
			running += len(runningMembers(t, h, j))
		}
		return running == 16
	}, 60*time.Second, 250*time.Millisecond, "batch fills the cluster\n%s", s.tl)
	s.tl.add("batch fills the cluster; urgent arrives")
	urgent := s.gangJob(cluster.WorkloadSpec{Name: "urgent", Replicas: 4, CPU: "4", Memory: "4Gi",
		Queue: "urgent", PriorityClassName: "high", RunSeconds: 5, IgnoreDisruptions: true}, 4)
	s.waitJobs(90*time.Second, urgent)
	require.NotEmpty(t, deleted.all(), "urgent got its room by preemption\n%s", s.tl)
	s.waitJobs(2*time.Minute, jobs...)
	s.waitPodGroupsFinished(15 * time.Second)
	for _, j := range jobs {
		got, err := h.Client.BatchV1().Jobs(j.Namespace).Get(h.Ctx, j.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Zero(t, got.Status.Failed, "evictions of %s did not count as failures", j.Name)
	}
}
