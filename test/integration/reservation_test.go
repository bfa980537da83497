package integration

import (
	"bytes"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/internal/flotillactl"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// smallWork is the stream of smaller work beside a big gang: 1 GPU, 4 cpu
// and 16Gi per pod, running 8-16 s.
type smallWork struct {
	// podsPerSecond is how many small pods arrive each second.
	podsPerSecond float64
	// runBound gives each pod activeDeadlineSeconds: its run plus 10 s.
	runBound bool
	// pairs makes each a gang of two such pods (a PodGroup of minMember
	// 2 and its Job), not a single pod.
	pairs bool
	// queue labels the pods with their queue ("": the default).
	queue string
	// dra makes each pod ask for its GPU as a DRA device, by the
	// extended resource the harness's DeviceClass serves.
	dra bool
}

// streamOfSmallJobs creates the small work as Jobs, as users do, until
// stop closes, and returns a func that waits for the stream to stop and
// lists its Jobs.
func streamOfSmallJobs(t *testing.T, s *scenario, w smallWork, stop <-chan struct{}) func() []*batchv1.Job {
	t.Helper()
	var mu sync.Mutex
	var jobs []*batchv1.Job
	done := make(chan struct{})
	replicas, perSecond := int32(1), w.podsPerSecond
	if w.pairs {
		replicas, perSecond = 2, w.podsPerSecond/2
	}
	go func() {
		defer close(done)
		rng := rand.New(rand.NewSource(11))
		tick := time.NewTicker(time.Duration(float64(time.Second) / perSecond))
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			run := 8 + rng.Intn(9)
			spec := cluster.WorkloadSpec{Name: fmt.Sprintf("small-%03d", i), Replicas: replicas, CPU: "4", Memory: "16Gi", GPU: "1", RunSeconds: float64(run), Queue: w.queue}
			if w.runBound {
				spec.RunBoundSeconds = ptr.To(int64(run + 10))
			}
			if w.dra {
				spec = draGPU(spec, false)
			}
			if w.pairs {
				spec.PodGroup = spec.Name
				if _, err := s.h.PodGroups.SchedulingV1alpha1().PodGroups("default").Create(s.h.Ctx, cluster.PodGroup("default", spec.Name, 2), metav1.CreateOptions{}); err != nil {
					s.tl.add("creating PodGroup %s: %v", spec.Name, err)
					continue
				}
			}
			job, err := s.h.CreateJob(s.h.Ctx, spec)
			if err != nil {
				s.tl.add("creating %s: %v", spec.Name, err)
				continue
			}
			mu.Lock()
			jobs = append(jobs, job)
			mu.Unlock()
		}
	}()
	return func() []*batchv1.Job {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return jobs
	}
}

// gpuUtilization samples, every half second until stop closes, the share
// of the cluster's GPUs that running pods request, from the first sample
// at which they all are (from then on small pods always wait).
func gpuUtilization(t *testing.T, h *harness.Harness, total int64, stop <-chan struct{}) func() float64 {
	t.Helper()
	var mu sync.Mutex
	var samples []float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			var used int64
			for _, p := range pods.Items {
				if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
					continue
				}
				for _, c := range p.Spec.Containers {
					if q, ok := c.Resources.Requests[cluster.GPU]; ok {
						used += q.Value()
					}
				}
			}
			mu.Lock()
			if len(samples) > 0 || used == total {
				samples = append(samples, float64(used)/float64(total))
			}
			mu.Unlock()
		}
	}()
	return func() float64 {
		<-done
		mu.Lock()
		defer mu.Unlock()
		if len(samples) == 0 {
			return 0
		}
		var sum float64
		for _, v := range samples {
			sum += v
		}
		return sum / float64(len(samples))
	}
}

// A large gang lands in bounded time under a stream of smaller work: 4
// nodes of 8 GPUs run a stream of 1-GPU Jobs arriving faster than the
// cluster drains them (small pods always wait); 10 s in, a mixed gang —
// a cpu leader and three workers of 8 GPUs, minMember 4, so it needs three
// whole nodes — arrives. Without reservation every GPU that frees goes at
// once to a waiting small pod and the gang binds only once the stream
// ends; with the shipped profile and reservation on (maxGangs 1) it holds the room where its quorum fits
// soonest once it has waited reservation.afterSeconds, and binds within
// 2.5 times the small pods' longest run of arriving, while the stream
// goes on. No small pod is evicted for it, the GPUs stay busy, the
// PodGroup says which nodes it holds, and every Job completes.
//
// The stream's variants are tests of their own so that make test runs
// them side by side (each needs cores to spare, not the whole machine).
// How much busier backfill keeps the held room is a measurement
// (docs/benchmarks.md), not an assertion: with bounds of the run plus
// 10 s few pods end before the held nodes' last bound, and the difference
// is within a run's spread.
func TestReservationLandsABigGangUnderAStream(t *testing.T) {
	landBigGangUnderStream(t, smallWork{podsPerSecond: 3.5})
}

// With the small pods carrying activeDeadlineSeconds (their run plus
// 10 s), pods sure to end before the gang could start may backfill the
// held room, and the gang binds within the same bound.
func TestReservationLandsABigGangUnderAStreamWithRunBounds(t *testing.T) {
	landBigGangUnderStream(t, smallWork{podsPerSecond: 3.5, runBound: true})
}

// The small work as gangs of two: they are placed whole, and kept off
// held room whole, as single pods are.
func TestReservationLandsABigGangUnderAStreamOfSmallGangs(t *testing.T) {
	landBigGangUnderStream(t, smallWork{podsPerSecond: 3.5, pairs: true})
}

// bigGang is a gang as a user makes it: a PodGroup of a cpu leader and
// workers of 8 GPUs, 16 cpu and 128Gi, each running 20 s, minMember all of
// them.
type bigGang struct {
	name          string
	workers       int32
	queue         string
	priorityClass string
	// claimTemplate, when set, makes each worker ask for its GPUs as DRA
	// devices, by a claim made from that template.
	claimTemplate string
}

// createBigGang creates gang big: a cpu leader and three 8-GPU workers
// (minMember 4), so it needs three whole nodes.
func createBigGang(t *testing.T, h *harness.Harness) (leader, workers *batchv1.Job) {
	t.Helper()
	return bigGang{name: "big", workers: 3}.create(t, h)
}

// create creates the gang's PodGroup and two Jobs, its leader and its
// workers.
func (g bigGang) create(t *testing.T, h *harness.Harness) (leader, workers *batchv1.Job) {
	t.Helper()
	createRolesGroup(t, h, g.name, g.workers+1, "", nil)
	leader, err := h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: g.name + "-leader", Replicas: 1, CPU: "8", Memory: "32Gi", PodGroup: g.name, RunSeconds: 20,
		Queue: g.queue, PriorityClassName: g.priorityClass})
	require.NoError(t, err)
	spec := cluster.WorkloadSpec{Name: g.name + "-worker", Replicas: g.workers, CPU: "16", Memory: "128Gi", GPU: "8", PodGroup: g.name, RunSeconds: 20, Indexed: true,
		Queue: g.queue, PriorityClassName: g.priorityClass}
	if g.claimTemplate != "" {
		spec.GPU, spec.ClaimTemplate = "", g.claimTemplate
	}
	workers, err = h.CreateJob(h.Ctx, spec)
	require.NoError(t, err)
	return leader, workers
}

// roomHeldEvent is the message of the PodGroup's RoomHeld event, "" when
// it has none.
func roomHeldEvent(t *testing.T, h *harness.Harness, group string) string {
	t.Helper()
	return groupEvent(t, h, group, "RoomHeld")
}

// groupEvent is the message of the PodGroup's event of the reason, ""
// when it has none.
func groupEvent(t *testing.T, h *harness.Harness, group, reason string) string {
	t.Helper()
	events, err := h.Client.CoreV1().Events("default").List(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range events.Items {
		if e.Reason == reason && e.InvolvedObject.Kind == "PodGroup" && e.InvolvedObject.Name == group {
			return e.Message
		}
	}
	return ""
}

// reservingConfig is the shipped configuration with reservation on for
// one gang at a time (EASY backfill), the rest of its args as shipped.
func reservingConfig(t *testing.T) []byte {
	t.Helper()
	config, err := manifests.WithReservation(shippedConfig(t, "scheduler-config.yaml"), 1)
	require.NoError(t, err)
	return config
}

// landBigGangUnderStream runs the stream of w and the gang (see
// TestReservationLandsABigGangUnderAStream) and checks that the gang
// lands, the GPUs stay busy and every Job completes.
func landBigGangUnderStream(t *testing.T, w smallWork) {
	t.Helper()
	nodes := nodeSpecs("gpu", 4, cluster.NodeSpec{CPU: "64", Memory: "512Gi", Extended: map[corev1.ResourceName]string{cluster.GPU: "8"}})
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodes...))
	h.StartScheduler(reservingConfig(t), cluster.SchedulerOptions{})
	s := startScenario(t, h, placementInvariants...)
	evicted := watchDeletedPods(t, h, "default")

	stopStream, stopSampling := make(chan struct{}), make(chan struct{})
	utilization := gpuUtilization(t, h, 4*8, stopSampling)
	streamed := streamOfSmallJobs(t, s, w, stopStream)
	s.tl.add("stream of small Jobs started (run bounds: %v, pairs: %v)", w.runBound, w.pairs)
	time.Sleep(10 * time.Second)

	leader, workers := createBigGang(t, h)
	arrived := time.Now()
	s.tl.add("gang big arrived: a cpu leader and three 8-GPU workers")

	// The small pods' longest run is 16 s: the gang binds within 40 s.
	const bound = 40 * time.Second
	bound4, err := h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=big", 4, bound)
	waited := time.Since(arrived)
	require.NoError(t, err, "gang big bound within %s of arriving, under the stream\n%s", bound, s.tl)
	s.tl.add("gang big bound after %s: %v", waited.Round(100*time.Millisecond), bound4)

	// The stream goes on past the gang's binding: it did not wait for the
	// stream to end.
	time.Sleep(10 * time.Second)
	close(stopStream)
	jobs := streamed()
	close(stopSampling)
	used := utilization()
	t.Logf("run bounds %v, pairs %v: %d small Jobs streamed; gang big bound %s after it arrived; GPU utilization over the stream %.0f%%",
		w.runBound, w.pairs, len(jobs), waited.Round(100*time.Millisecond), 100*used)
	assert.GreaterOrEqual(t, used, 0.8, "the GPUs stay busy while the gang holds room\n%s", s.tl)

	var held string
	require.Eventually(t, func() bool { held = roomHeldEvent(t, h, "big"); return held != "" }, 10*time.Second, 250*time.Millisecond,
		"the PodGroup says it holds room\n%s", s.tl)
	assert.Contains(t, held, "gang default/big holds room on ", held)

	s.waitJobs(3*time.Minute, append(jobs, leader, workers)...)
	assert.Empty(t, evicted.all(), "no small pod is evicted for the gang")
}

// A reservation is not lost with the scheduler: SIGKILLed while a gang
// holds room under the stream, a new scheduler plans the gang's
// reservation again from the cluster at its first check (the gang's
// members sort ahead of the later small pods, and room freed meanwhile
// is still free), and the gang still binds within the bound.
func TestReservationSurvivesASchedulerRestart(t *testing.T) {
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodeSpecs("gpu", 4, cluster.NodeSpec{CPU: "64", Memory: "512Gi", Extended: map[corev1.ResourceName]string{cluster.GPU: "8"}})...))
	config := reservingConfig(t)
	start := func() *cluster.SchedulerProcess {
		p, err := h.StartSchedulerProcess(h.Ctx, config, "--leader-elect=false")
		require.NoError(t, err)
		return p
	}
	scheduler := start()
	s := startScenario(t, h, placementInvariants...)
	evicted := watchDeletedPods(t, h, "default")
	stopStream := make(chan struct{})
	streamed := streamOfSmallJobs(t, s, smallWork{podsPerSecond: 3.5}, stopStream)
	time.Sleep(10 * time.Second)

	leader, workers := createBigGang(t, h)
	arrived := time.Now()
	s.tl.add("gang big arrived")

	require.Eventually(t, func() bool { return roomHeldEvent(t, h, "big") != "" }, 30*time.Second, 250*time.Millisecond, "gang big holds room\n%s", s.tl)
	require.NoError(t, scheduler.Kill())
	s.tl.add("scheduler SIGKILLed while gang big holds room")
	scheduler = start()
	s.tl.add("a new scheduler started")

	const bound = 40 * time.Second
	_, err := h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=big", 4, bound-time.Since(arrived))
	require.NoError(t, err, "gang big bound within %s of arriving, across the restart\n%s", bound, s.tl)
	s.tl.add("gang big bound after %s", time.Since(arrived).Round(100*time.Millisecond))
	t.Logf("gang big bound %s after it arrived, across a restart", time.Since(arrived).Round(100*time.Millisecond))
	close(stopStream)
	s.waitJobs(3*time.Minute, append(streamed(), leader, workers)...)
	assert.Empty(t, evicted.all(), "no small pod is evicted for the gang")
}

// streamRun is a cluster of 4 nodes of 8 GPUs, 64 cpu and 512Gi with the
// shipped profile and reservation on, running a stream of small work.
type streamRun struct {
	h       *harness.Harness
	s       *scenario
	evicted *deletedPods
	// stop ends the stream and lists its Jobs.
	stop func() []*batchv1.Job
}

// startStream starts the cluster, creates the queues, starts the stream
// and lets it run 10 s, until small pods always wait.
func startStream(t *testing.T, w smallWork, queues ...*flotillav1alpha1.Queue) streamRun {
	t.Helper()
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, nodeSpecs("gpu", 4, cluster.NodeSpec{CPU: "64", Memory: "512Gi", Extended: map[corev1.ResourceName]string{cluster.GPU: "8"}})...))
	for _, q := range queues {
		require.NoError(t, h.CreateQueue(h.Ctx, q))
	}
	h.StartScheduler(reservingConfig(t), cluster.SchedulerOptions{})
	s := startScenario(t, h, placementInvariants...)
	evicted := watchDeletedPods(t, h, "default")
	stop := make(chan struct{})
	streamed := streamOfSmallJobs(t, s, w, stop)
	time.Sleep(10 * time.Second)
	return streamRun{h: h, s: s, evicted: evicted, stop: func() []*batchv1.Job { close(stop); return streamed() }}
}

// A gang holds no room it could not use, and says why: under a stream of
// small Jobs (queue batch, weight 9) on 4 nodes of 8 GPUs, gang over
// (a cpu leader and three 8-GPU workers) of queue team (weight 1, a
// tenth of the cluster) is refused by its queue and holds nothing; gang
// too-big, five 8-GPU workers in batch, is admitted (no queue could hold
// it, so it is not the queues' to refuse) but does not fit even once
// every running pod ends, and says so. Neither keeps a small pod off
// any node, and every small Job completes.
func TestReservationHoldsNothingItCannotUse(t *testing.T) {
	run := startStream(t, smallWork{podsPerSecond: 3.5, queue: "batch"}, cluster.Queue("batch", 9, ""), cluster.Queue("team", 1, ""))
	h, s, evicted := run.h, run.s, run.evicted

	overLeader, overWorkers := bigGang{name: "over", workers: 3, queue: "team"}.create(t, h)
	createRolesGroup(t, h, "too-big", 5, "", nil)
	tooBig, err := h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "too-big", Replicas: 5, CPU: "4", Memory: "32Gi", GPU: "8", PodGroup: "too-big", RunSeconds: 20, Indexed: true, Queue: "batch"})
	require.NoError(t, err)
	s.tl.add("gangs over (queue team) and too-big (5 whole nodes of 4) arrived")

	// reservation.afterSeconds is 10: past it, each is checked again
	// within seconds.
	var notHeld string
	require.Eventually(t, func() bool { notHeld = groupEvent(t, h, "too-big", "RoomNotHeld"); return notHeld != "" }, 40*time.Second, 250*time.Millisecond,
		"gang too-big says it holds no room\n%s", s.tl)
	assert.Contains(t, notHeld, "gang default/too-big holds no room: even once every running pod ends")
	s.tl.add("too-big: %s", notHeld)
	s.assertGangHoldsNothingFor("over", 10*time.Second, "(its queue refuses it)")
	assert.Empty(t, roomHeldEvent(t, h, "over"), "a gang its queue refuses holds no room")
	assert.Empty(t, roomHeldEvent(t, h, "too-big"), "a gang that cannot fit holds no room")
	refusal := podEventContaining(t, h, "over-worker", "FailedScheduling", `queue "team"`)
	assert.Contains(t, refusal, "would exceed its deserved share of nvidia.com/gpu", "the gang's members say why they wait")
	assert.Empty(t, podEventContaining(t, h, "small-", "FailedScheduling", "is held for gang"), "no small pod is kept off held room")

	jobs := run.stop()
	for _, j := range []*batchv1.Job{overLeader, overWorkers, tooBig} {
		require.NoError(t, h.Client.BatchV1().Jobs("default").Delete(h.Ctx, j.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
	}
	s.waitJobs(3*time.Minute, jobs...)
	for _, name := range evicted.all() {
		assert.False(t, strings.HasPrefix(name, "small-"), "small pod %s is evicted", name)
	}
}

// podEventContaining is the message of the first event of the reason
// about a pod whose name starts with prefix and whose message contains
// part, "" when there is none.
func podEventContaining(t *testing.T, h *harness.Harness, prefix, reason, part string) string {
	t.Helper()
	events, err := h.Client.CoreV1().Events("default").List(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, e := range events.Items {
		if e.Reason == reason && e.InvolvedObject.Kind == "Pod" && strings.HasPrefix(e.InvolvedObject.Name, prefix) && strings.Contains(e.Message, part) {
			return e.Message
		}
	}
	return ""
}

// A gang of higher priority may take room a gang holds (it could preempt
// for it anyway), and the held gang's reservation is planned again: on 4
// nodes of 8 GPUs under a stream of small Jobs, gang big (three 8-GPU
// workers and a cpu leader, priority 0) holds room; then gang urgent (two
// 8-GPU workers and a leader, priority 1000, running 20 s) arrives, binds
// first, taking held room or preempting small pods, and big still binds
// once urgent has run, its room held again meanwhile. Nothing of big or
// urgent is evicted, and every Job completes.
func TestReservationGivesWayToAHigherPriorityGang(t *testing.T) {
	run := startStream(t, smallWork{podsPerSecond: 3.5})
	h, s, evicted := run.h, run.s, run.evicted
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "urgent", 1000, false))

	bigLeader, bigWorkers := createBigGang(t, h)
	s.tl.add("gang big arrived")
	var held string
	require.Eventually(t, func() bool { held = roomHeldEvent(t, h, "big"); return held != "" }, 30*time.Second, 250*time.Millisecond, "gang big holds room\n%s", s.tl)
	s.tl.add("big: %s", held)

	urgentLeader, urgentWorkers := bigGang{name: "urgent", workers: 2, priorityClass: "urgent"}.create(t, h)
	urgentArrived := time.Now()
	s.tl.add("gang urgent (priority 1000) arrived")
	urgentBound, err := h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=urgent", 3, 40*time.Second)
	require.NoError(t, err, "gang urgent bound, ahead of the held gang\n%s", s.tl)
	s.tl.add("gang urgent bound after %s: %v", time.Since(urgentArrived).Round(100*time.Millisecond), urgentBound)
	bound, _, err := h.BoundMembers(h.Ctx, "default", "big")
	require.NoError(t, err)
	assert.Less(t, bound, 4, "gang big, of lower priority, was not placed whole before urgent")

	// urgent runs 20 s and the small pods at most 16: big binds within
	// 2.5 times the longest run of urgent binding.
	_, err = h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=big", 4, 50*time.Second)
	require.NoError(t, err, "gang big bound once urgent had run, its reservation planned again\n%s", s.tl)
	s.tl.add("gang big bound")

	s.waitJobs(3*time.Minute, append(run.stop(), bigLeader, bigWorkers, urgentLeader, urgentWorkers)...)
	for _, name := range evicted.all() {
		assert.True(t, strings.HasPrefix(name, "small-"), "only small pods, of lower priority than urgent, may be preempted: %s was", name)
	}
}

// A mixed gang whose workers are required in one clique reserves in one
// clique: two cliques of three nodes of 8 GPUs run a stream of small
// Jobs; gang mixed — a cpu leader anywhere and three 8-GPU workers, role
// workers required in one NVLink clique — holds room where a whole clique
// frees soonest, and its workers bind there, while the stream goes on.
func TestReservationOfARoleRequiredInOneClique(t *testing.T) {
	gpuNode := func(clique string, i int) cluster.NodeSpec {
		name := fmt.Sprintf("%s-%d", clique, i)
		return cluster.NodeSpec{Name: name, CPU: "64", Memory: "512Gi", Extended: map[corev1.ResourceName]string{cluster.GPU: "8"},
			Labels: map[string]string{cluster.CliqueLabel: clique, corev1.LabelHostname: name}}
	}
	var specs []cluster.NodeSpec
	for _, clique := range []string{"clique-a", "clique-b"} {
		for i := range 3 {
			specs = append(specs, gpuNode(clique, i))
		}
	}
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, specs...))
	h.StartScheduler(reservingConfig(t), cluster.SchedulerOptions{})
	s := startScenario(t, h, placementInvariants...)
	evicted := watchDeletedPods(t, h, "default")
	stopStream := make(chan struct{})
	streamed := streamOfSmallJobs(t, s, smallWork{podsPerSecond: 5}, stopStream)
	time.Sleep(10 * time.Second)

	roles := `[{"name": "leader", "minMember": 1, "selector": {"matchLabels": {"app": "mixed-leader"}}},
	           {"name": "workers", "minMember": 3, "topologyRequired": "` + cluster.CliqueLabel + `", "selector": {"matchLabels": {"app": "mixed-worker"}}}]`
	createRolesGroup(t, h, "mixed", 4, roles, nil)
	leader, err := h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "mixed-leader", Replicas: 1, CPU: "8", Memory: "32Gi", PodGroup: "mixed", RunSeconds: 20})
	require.NoError(t, err)
	workers, err := h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "mixed-worker", Replicas: 3, CPU: "16", Memory: "128Gi", GPU: "8", PodGroup: "mixed", RunSeconds: 20, Indexed: true})
	require.NoError(t, err)
	arrived := time.Now()
	s.tl.add("gang mixed arrived: a cpu leader, three 8-GPU workers required in one clique")

	var held string
	require.Eventually(t, func() bool { held = roomHeldEvent(t, h, "mixed"); return held != "" }, 30*time.Second, 250*time.Millisecond, "gang mixed holds room\n%s", s.tl)
	s.tl.add("mixed: %s", held)
	perClique := map[string]int{}
	for _, node := range heldNodes(held) {
		perClique[prefixOf(node)]++
	}
	assert.True(t, perClique["clique-a"] >= 3 || perClique["clique-b"] >= 3, "the workers' room is held in one clique: %s", held)

	// kubectl flotilla why shows the held nodes and what still runs
	// there; a small pod kept off them names the gang.
	why := kubectlFlotillaWhy(t, h, "podgroup/mixed")
	require.Len(t, why, 1)
	require.NotNil(t, why[0].Held, "why podgroup/mixed shows the room it holds: %+v", why[0])
	assert.NotEmpty(t, why[0].Held.Nodes)
	assert.Len(t, why[0].Held.Running, len(why[0].Held.Nodes), "what runs on each held node")
	require.Eventually(t, func() bool {
		return podEventContaining(t, h, "small-", "FailedScheduling", "is held for gang default/mixed") != ""
	}, 30*time.Second, 250*time.Millisecond, "a small pod kept off the held room says which gang holds it\n%s", s.tl)

	_, err = h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=mixed", 4, 60*time.Second)
	require.NoError(t, err, "gang mixed bound under the stream\n%s", s.tl)
	s.tl.add("gang mixed bound after %s", time.Since(arrived).Round(100*time.Millisecond))
	cliques := map[string]bool{}
	for _, node := range podsOn(t, h, "app=mixed-worker") {
		cliques[prefixOf(node)] = true
	}
	assert.Len(t, cliques, 1, "the workers are in one clique")

	close(stopStream)
	s.waitJobs(3*time.Minute, append(streamed(), leader, workers)...)
	assert.Empty(t, evicted.all(), "no small pod is evicted for the gang")
}

// heldNodes are the nodes a RoomHeld event names.
func heldNodes(event string) []string {
	m := heldNodesIn.FindStringSubmatch(event)
	if m == nil {
		return nil
	}
	return strings.Split(m[1], ", ")
}

// heldNodesIn finds the nodes in a RoomHeld message, after the gang's
// name (which names its API in parentheses for a native group).
var heldNodesIn = regexp.MustCompile(`holds room on \d+ nodes? \(([^)]*)\)`)

// kubectlFlotillaWhy runs kubectl flotilla why -o json for the object in
// namespace default.
func kubectlFlotillaWhy(t *testing.T, h *harness.Harness, object string) []flotillactl.Explanation {
	t.Helper()
	var out bytes.Buffer
	cmd := flotillactl.NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out}, "v0.0.0-test")
	cmd.SetArgs([]string{"--kubeconfig", h.KubeconfigPath, "why", "-n", "default", "-o", "json", object})
	require.NoError(t, cmd.ExecuteContext(h.Ctx), out.String())
	var got []flotillactl.Explanation
	decodeItems(t, out.Bytes(), &got)
	return got
}

// With two queues the gang lands as well: queue training (weight 3) has
// only the big gang, within its share of three quarters of the GPUs;
// queue batch (weight 1) streams the small Jobs that fill the rest and,
// before the gang arrives, borrow the whole cluster. Once the gang asks,
// batch is over its share: it is refused more, training may reclaim from
// it, and the gang binds within the bound however that goes; every Job
// completes, and only batch's small pods may be evicted.
func TestReservationWithTwoQueues(t *testing.T) {
	run := startStream(t, smallWork{podsPerSecond: 3.5, queue: "batch"}, cluster.Queue("training", 3, ""), cluster.Queue("batch", 1, ""))
	h, s, evicted := run.h, run.s, run.evicted

	leader, workers := bigGang{name: "big", workers: 3, queue: "training"}.create(t, h)
	arrived := time.Now()
	s.tl.add("gang big (queue training) arrived")
	_, err := h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=big", 4, 40*time.Second)
	require.NoError(t, err, "gang big bound within 40 s of arriving, beside the other queue's stream\n%s", s.tl)
	s.tl.add("gang big bound after %s", time.Since(arrived).Round(100*time.Millisecond))
	t.Logf("gang big bound %s after it arrived; RoomHeld: %q", time.Since(arrived).Round(100*time.Millisecond), roomHeldEvent(t, h, "big"))

	time.Sleep(5 * time.Second)
	s.waitJobs(3*time.Minute, append(run.stop(), leader, workers)...)
	for _, name := range evicted.all() {
		assert.True(t, strings.HasPrefix(name, "small-"), "only batch's small pods, over its share, may be evicted: %s was", name)
	}
}

// DRA devices on held nodes are held like allocatable ones: 4 nodes whose
// 8 GPUs each are DRA devices (none in allocatable) run a stream of 1-GPU
// Jobs asking by the extended resource a DeviceClass serves; 10 s in, a
// mixed gang — a cpu leader and three workers asking 8 devices each by a
// claim template — arrives. It holds room on three nodes, where the
// small pods' claims free their devices as they end, keeps later small
// pods off those devices (counting them idle, as its queue is charged for
// them), and binds within 2.5 times the small pods' longest run of
// arriving while the stream goes on; no device is in two claims, no small
// pod is evicted, and every Job completes.
func TestReservationHoldsDRADevices(t *testing.T) {
	specs := nodeSpecs("gpu", 4, cluster.NodeSpec{CPU: "64", Memory: "512Gi"})
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{})
	require.NoError(t, h.CreateNodes(h.Ctx, specs...))
	require.NoError(t, h.CreateDeviceClass(h.Ctx, draClassName, string(draExtendedGPU)))
	for _, n := range specs {
		require.NoError(t, h.PublishDevices(h.Ctx, n.Name, 8))
	}
	require.NoError(t, h.CreateClaimTemplate(h.Ctx, "default", "eight-gpus", draClassName, 8))
	h.StartScheduler(reservingConfig(t), cluster.SchedulerOptions{})
	s := startScenario(t, h, append(append([]invariant{}, placementInvariants...), invariant{kind: devicesAllocatedOnce})...)
	evicted := watchDeletedPods(t, h, "default")
	stop := make(chan struct{})
	streamed := streamOfSmallJobs(t, s, smallWork{podsPerSecond: 3.5, dra: true}, stop)
	s.tl.add("stream of small Jobs asking for DRA devices started")
	time.Sleep(10 * time.Second)

	leader, workers := bigGang{name: "big", workers: 3, claimTemplate: "eight-gpus"}.create(t, h)
	arrived := time.Now()
	s.tl.add("gang big arrived: a cpu leader and three workers of 8 DRA devices by claim")
	const bound = 40 * time.Second
	bound4, err := h.WaitForPodsBound(h.Ctx, "default", "scheduling.x-k8s.io/pod-group=big", 4, bound)
	waited := time.Since(arrived)
	require.NoError(t, err, "gang big bound within %s of arriving, under the stream\n%s", bound, s.tl)
	s.tl.add("gang big bound after %s: %v", waited.Round(100*time.Millisecond), bound4)
	held := groupEvent(t, h, "big", "RoomHeld")
	assert.GreaterOrEqual(t, len(heldNodes(held)), 3, "the gang held three workers' nodes' devices: %q\n%s", held, s.tl)
	// Devices freed on the held nodes and kept for the gang were idle, and
	// counted so (as its queue is charged for them).
	assert.Positive(t, metricValue(t, "flotilla_gang_reservation_idle_resource_seconds_total", map[string]string{"resource": string(draExtendedGPU)}),
		"held devices counted idle while they waited for the gang")

	time.Sleep(5 * time.Second)
	close(stop)
	jobs := streamed()
	t.Logf("%d small Jobs streamed; gang big bound %s after it arrived", len(jobs), waited.Round(100*time.Millisecond))
	s.waitJobs(3*time.Minute, append(jobs, leader, workers)...)
	assert.Empty(t, evicted.all(), "no small pod is evicted for the gang")
}
