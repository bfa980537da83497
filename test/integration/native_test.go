package integration

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/internal/flotillactl"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// startNative starts the realistic cluster with native groups on, and
// flotilla-scheduler with the shipped configuration and the gate.
func startNative(t *testing.T, nodes ...cluster.NodeSpec) *harness.Harness {
	t.Helper()
	return startNativeWith(t, "GenericWorkload=true", cluster.NativeGroupsAPIServerFlags, nodes...)
}

// startNativeWith is startNative with the given feature gates on both the
// apiserver (beside its other flags) and the scheduler.
func startNativeWith(t *testing.T, gates string, apiserverFlags []string, nodes ...cluster.NodeSpec) *harness.Harness {
	t.Helper()
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{ExtraAPIServerFlags: apiserverFlags})
	require.NoError(t, h.CreateNodes(h.Ctx, nodes...))
	h.StartScheduler(shippedConfig(t, "scheduler-config.yaml"), cluster.SchedulerOptions{Flags: []string{"--feature-gates=" + gates}})
	return h
}

// createNativeGroup creates a Workload and its PodGroup (a gang of
// minCount, disruption mode all when whole), as a framework that speaks
// the native API makes them, labelled with the queue on the Workload ("":
// no label, the namespace's queue).
func createNativeGroup(t *testing.T, h *harness.Harness, name, queue string, minCount int32, whole bool) {
	t.Helper()
	createNativeGroupIn(t, h, name, queue, minCount, whole, "")
}

// createNativeGroupIn is createNativeGroup for a group confined to one
// domain of the node label topology ("": anywhere), by its scheduling
// constraint.
func createNativeGroupIn(t *testing.T, h *harness.Harness, name, queue string, minCount int32, whole bool, topology string) {
	t.Helper()
	gang := schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}
	workload := &schedulingv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: schedulingv1beta1.WorkloadSpec{PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{{
			Name: "workers", SchedulingPolicy: gang,
		}}},
	}
	if queue != "" {
		workload.Labels = map[string]string{flotillav1alpha1.QueueLabel: queue}
	}
	_, err := h.Client.SchedulingV1beta1().Workloads("default").Create(h.Ctx, workload, metav1.CreateOptions{})
	require.NoError(t, err)
	pg := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{
			WorkloadRef:      &schedulingv1beta1.WorkloadReference{WorkloadName: name, TemplateName: "workers"},
			SchedulingPolicy: gang,
		},
	}
	if whole {
		pg.Spec.DisruptionMode = &schedulingv1beta1.DisruptionMode{All: &schedulingv1beta1.AllDisruptionMode{}}
	}
	if topology != "" {
		pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: topology}}}
	}
	_, err = h.Client.SchedulingV1beta1().PodGroups("default").Create(h.Ctx, pg, metav1.CreateOptions{})
	require.NoError(t, err)
}

// nativeJob is a Job whose pods join the native PodGroup group, as a
// framework's template names it.
func nativeJob(spec cluster.WorkloadSpec, group string) *batchv1.Job {
	job := cluster.Job(spec)
	job.Spec.Template.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	return job
}

func createJob(t *testing.T, h *harness.Harness, job *batchv1.Job) *batchv1.Job {
	t.Helper()
	created, err := h.Client.BatchV1().Jobs(job.Namespace).Create(h.Ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// A native gang of mixed members (a leader Job of one 2-cpu pod beside a
// Job of three 4-cpu workers, one PodGroup of minCount 4, as an
// LWS-style framework makes them) is admitted by its Queue as a unit and
// held back by its capability; raised, it reclaims from a queue above its
// deserved share: Preemption's PodGroupPostFilter chooses the victims,
// whole gangs of the other queue where their disruption mode says so, and
// the gang binds together. Through the apiserver with the gate on; the
// scenario checks nothing is bound twice, no node is over-committed and
// no gang is left partial past its timeout, the whole time.
func TestNativeGangQueuedCappedAndReclaiming(t *testing.T) {
	h := startNative(t, nodes(4, "8")...)
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("batch", 1, "")))
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("prod", 1, "", cappedCPU("12"))))
	s := startScenario(t, h, append(placementInvariants, invariant{kind: gangsStayWhole, within: 30 * time.Second})...)
	s.native = true

	// batch borrows the idle cluster: two native gangs of four 2-cpu pods
	// that go only whole (disruption mode all), then 16 one-cpu pods of a
	// Deployment (after the gangs: the packing asserted below is of gangs
	// placed on empty nodes, and a Deployment's pods racing them there
	// would leave no node empty).
	for _, name := range []string{"batch-a", "batch-b"} {
		createNativeGroup(t, h, name, "batch", 4, true)
		createJob(t, h, nativeJob(cluster.WorkloadSpec{Name: name, Replicas: 4, CPU: "2", Memory: "2Gi", Queue: "batch", IgnoreDisruptions: true}, name))
	}
	_, err := h.WaitForPodsBound(h.Ctx, "default", flotillav1alpha1.QueueLabel+"=batch", 8, bindTimeout)
	require.NoError(t, err, "batch's gangs bind\n%s", s.tl)
	_, err = h.CreateDeployment(h.Ctx, cluster.WorkloadSpec{Name: "batch-web", Replicas: 16, CPU: "1", Memory: "1Gi", Queue: "batch"})
	require.NoError(t, err)
	placedBatch, err := h.WaitForPodsBound(h.Ctx, "default", flotillav1alpha1.QueueLabel+"=batch", 24, bindTimeout)
	require.NoError(t, err, "batch fills the cluster\n%s", s.tl)
	// Binpack scores each member in the pod-group cycle: a gang placed on
	// the empty cluster fills one node (the default profile's
	// LeastAllocated would put its four members on four nodes).
	packed := false
	for _, gang := range []string{"batch-a", "batch-b"} {
		nodes := map[string]bool{}
		for pod, node := range placedBatch {
			if strings.HasPrefix(pod, gang+"-") {
				nodes[node] = true
			}
		}
		packed = packed || len(nodes) == 1
	}
	require.True(t, packed, "a native gang placed on empty nodes is packed onto one: %v\n%s", placedBatch, s.tl)

	// prod's gang asks 14 cpu, above its capability of 12: held back as a
	// unit, no member placed. The member tried first says why; the cycle
	// stops there (too few left for minCount), so the PodGroup is told.
	createNativeGroup(t, h, "serve", "prod", 4, false)
	leader := cluster.WorkloadSpec{Name: "serve-leader", Replicas: 1, CPU: "2", Memory: "4Gi", Queue: "prod", IgnoreDisruptions: true}
	workers := cluster.WorkloadSpec{Name: "serve-workers", Replicas: 3, CPU: "4", Memory: "8Gi", Queue: "prod", IgnoreDisruptions: true}
	createJob(t, h, nativeJob(leader, "serve"))
	createJob(t, h, nativeJob(workers, "serve"))
	ev, err := h.WaitForEvent(h.Ctx, "default", "serve", "QueueCapability", bindTimeout)
	require.NoError(t, err, "the native PodGroup is told its queue's capability holds it\n%s", s.tl)
	require.Contains(t, ev.Note, `queue "prod": gang default/serve (scheduling.k8s.io) (4 members for its quorum) would exceed its capability of cpu (14 > 12)`)
	var bound []string
	capped := func() bool {
		pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{LabelSelector: flotillav1alpha1.QueueLabel + "=prod"})
		if err != nil || len(pods.Items) < 4 {
			return false
		}
		var told bool
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				bound = append(bound, p.Name+" on "+p.Spec.NodeName)
			}
			if c := cluster.PodScheduledCondition(&p); c != nil && strings.Contains(c.Message, "QueueCapability") {
				told = true
			}
		}
		return told || len(bound) > 0
	}
	require.Eventually(t, capped, bindTimeout, 200*time.Millisecond, "a member of the capped native gang says its queue's capability holds it\n%s", s.tl)
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		capped()
	}
	require.Empty(t, bound, "no member of the capped gang binds\n%s", s.tl)
	// kubectl flotilla shows the native gang waiting, and why.
	kubectl := func(args ...string) string {
		var out bytes.Buffer
		cmd := flotillactl.NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out}, "v0.0.0-test")
		cmd.SetArgs(append([]string{"--kubeconfig", h.KubeconfigPath}, args...))
		require.NoError(t, cmd.ExecuteContext(h.Ctx), out.String())
		return out.String()
	}
	var pending []flotillactl.PendingEntry
	decodeItems(t, []byte(kubectl("pending", "-A", "--queue", "prod", "-o", "json")), &pending)
	require.Len(t, pending, 1)
	require.Equal(t, "default/serve (scheduling.k8s.io)", pending[0].Name)
	require.Equal(t, int32(4), pending[0].MinMember)
	require.Equal(t, 4, pending[0].Pending)
	require.Equal(t, []string{string(reasons.QueueCapability)}, pending[0].Reasons, pending[0].Message)
	var why []flotillactl.Explanation
	decodeItems(t, []byte(kubectl("why", "-n", "default", "podgroups.scheduling.k8s.io/serve", "-o", "json")), &why)
	require.Len(t, why, 1)
	require.Len(t, why[0].Pending, 4, "leader and workers")
	require.Equal(t, "prod", why[0].Queue, "the Workload's queue label")
	require.Equal(t, []string{string(reasons.QueueCapability)}, why[0].Reasons, why[0].Message)
	s.tl.add("prod's gang held back by its capability")

	// Raised to 16 cpu (its deserved share, half the cluster): the gang
	// reclaims 14 cpu from batch, which holds 24 of 32.
	_, err = h.Dynamic.Resource(flotillav1alpha1.QueueResource).Patch(h.Ctx, "prod", types.MergePatchType, []byte(`{"spec":{"capability":null}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	s.tl.add("prod's capability lifted")
	placed, err := h.WaitForPodsBound(h.Ctx, "default", flotillav1alpha1.QueueLabel+"=prod", 4, 2*bindTimeout)
	require.NoError(t, err, "the native gang reclaims its share\n%s", s.tl)
	require.Len(t, placed, 4)

	// Victims were chosen by Preemption (its condition names the
	// scheduler), and a batch gang in mode all went whole or not at all.
	events, err := h.Client.EventsV1().Events("default").List(h.Ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var preempted int
	for _, e := range events.Items {
		if e.Reason == "Preempted" || e.Reason == "Reclaimed" {
			preempted++
		}
	}
	require.Positive(t, preempted, "victims were evicted by flotilla's preemption\n%s", s.tl)
}

// Both APIs at once: a scheduler-plugins gang and a native gang in one
// queue whose capability holds one of them at a time contend; both
// complete, one gang after the other, no gang is ever partly bound past
// its timeout and nothing is bound twice. A pod that names a native group
// and carries the scheduler-plugins label as well is scheduled with the
// native group only (it completes its quorum), and says so in an event.
func TestNativeAndPluginGangsInOneQueue(t *testing.T) {
	h := startNative(t, nodes(3, "8")...)
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("team", 1, "", cappedCPU("16"))))
	s := startScenario(t, h, placementInvariants...)
	s.native = true

	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "plugin-gang", 4))
	createNativeGroup(t, h, "native-gang", "team", 4, false)
	plugin := cluster.WorkloadSpec{Name: "plugin-gang", Replicas: 4, CPU: "4", Memory: "4Gi", Queue: "team", PodGroup: "plugin-gang", RunSeconds: 4}
	native := cluster.WorkloadSpec{Name: "native-gang", Replicas: 3, CPU: "4", Memory: "4Gi", Queue: "team", RunSeconds: 4}
	jobs := []*batchv1.Job{createJob(t, h, cluster.Job(plugin)), createJob(t, h, nativeJob(native, "native-gang"))}

	// The native gang's fourth member names both groups (a bare pod, as a
	// framework's coordinator might be): the native one wins.
	both := cluster.Pod(cluster.PodSpec{Namespace: "default", Name: "in-both", CPU: "4", Memory: "4Gi", Labels: map[string]string{
		schedv1alpha1.PodGroupLabel: "plugin-gang", flotillav1alpha1.QueueLabel: "team",
	}})
	both.Annotations = map[string]string{cluster.RunSecondsAnnotation: "4"}
	both.Spec.RestartPolicy = corev1.RestartPolicyNever
	both.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("native-gang")}
	_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, both, metav1.CreateOptions{})
	require.NoError(t, err)
	ev, err := h.WaitForEvent(h.Ctx, "default", "in-both", "InTwoPodGroups", bindTimeout)
	require.NoError(t, err, "a pod in two groups is told which one schedules it\n%s", s.tl)
	require.Contains(t, ev.Note, "native-gang ("+"scheduling.k8s.io)")

	s.waitJobs(3*bindTimeout, jobs...)
	require.Eventually(t, func() bool {
		p, err := h.Client.CoreV1().Pods("default").Get(h.Ctx, "in-both", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded
	}, bindTimeout, 200*time.Millisecond, "the pod in both groups ran with the native gang\n%s", s.tl)
}

// With topology-aware workload scheduling on as well, kube-scheduler tries
// a native gang's zones one by one and keeps the best-ranked: Gang
// proposes the zones, Binpack ranks them. Zone g has two GPU nodes (8 cpu,
// 4 GPUs each; an inference Deployment holds 2 of the GPUs), zone c two
// CPU nodes. A CPU-only mixed gang (a 2-cpu leader, two 4-cpu workers: 10
// cpu) fits either zone. kube-scheduler's own placement score
// (NodeResourcesFit, most allocated over the placement) takes the fuller
// zone, g, and a GPU gang (a leader and two workers unlike it, 2 GPUs
// each, 7 cpu) would then find too little cpu beside the free GPUs, for
// as long as the CPU gang runs. Binpack ranks the GPU zone below any zone
// where no member sits on a node's free GPUs: the CPU gang goes to zone c
// and the GPU gang binds in zone g. A third, CPU-only gang (9 cpu) finds
// no zone with room: its PodGroup says so, and it binds when the first
// gang's Jobs complete. Through the apiserver, gates on, Jobs that run and
// finish, GPUs from the nodes' allocatable.
//
// The sizes are such that kube-scheduler's pod-group cycle, which places a
// placement's members one by one in its own order (each where Binpack
// scores best), fits each gang in its zone whatever that order.
func TestNativeGangKeepsOffFreeGPUs(t *testing.T) {
	gates := "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
	node := func(name, zone string, gpus string) cluster.NodeSpec {
		spec := cluster.NodeSpec{Name: name, CPU: "8", Memory: "32Gi", Labels: map[string]string{cluster.ZoneLabel: zone}}
		if gpus != "" {
			spec.Extended = map[corev1.ResourceName]string{cluster.GPU: gpus}
		}
		return spec
	}
	h := startNativeWith(t, gates, []string{"--feature-gates=" + gates, "--runtime-config=scheduling.k8s.io/v1beta1=true"},
		node("g-0", "g", "4"), node("g-1", "g", "4"), node("c-0", "c", ""), node("c-1", "c", ""))
	require.NoError(t, h.CreateQueue(h.Ctx, queueSpec("team", 1, "")))
	s := startScenario(t, h, placementInvariants...)
	s.native = true

	_, err := h.CreateDeployment(h.Ctx, cluster.WorkloadSpec{Name: "inference", Replicas: 1, CPU: "2", Memory: "4Gi", GPU: "2", Queue: "team"})
	require.NoError(t, err)
	_, err = h.WaitForPodsBound(h.Ctx, "default", "app=inference", 1, bindTimeout)
	require.NoError(t, err, "the inference Deployment runs\n%s", s.tl)

	gang := func(name string, minCount int32, run float64, leader, workers cluster.WorkloadSpec) []*batchv1.Job {
		createNativeGroupIn(t, h, name, "team", minCount, false, cluster.ZoneLabel)
		leader.Name, workers.Name = name+"-leader", name+"-workers"
		leader.Queue, workers.Queue = "team", "team"
		leader.RunSeconds, workers.RunSeconds = run, run
		return []*batchv1.Job{createJob(t, h, nativeJob(leader, name)), createJob(t, h, nativeJob(workers, name))}
	}
	// zonesOf waits for the gang's members to bind and returns their zones
	// (a node's name starts with its zone's).
	zonesOf := func(name string, members int) map[string]bool {
		t.Helper()
		placed, err := h.WaitForPodsBound(h.Ctx, "default", "batch.kubernetes.io/job-name in ("+name+"-leader,"+name+"-workers)", members, 2*bindTimeout)
		require.NoError(t, err, "gang %s binds\n%s", name, s.tl)
		zones := map[string]bool{}
		for _, n := range placed {
			zones[n[:1]] = true
		}
		return zones
	}

	etl := gang("etl", 3, 25, cluster.WorkloadSpec{Replicas: 1, CPU: "2", Memory: "4Gi"}, cluster.WorkloadSpec{Replicas: 2, CPU: "4", Memory: "8Gi"})
	require.Equal(t, map[string]bool{"c": true}, zonesOf("etl", 3), "the CPU gang keeps off the free GPUs\n%s", s.tl)
	s.tl.add("etl bound in zone c")

	train := gang("train", 3, 25, cluster.WorkloadSpec{Replicas: 1, CPU: "1", Memory: "2Gi", GPU: "2"}, cluster.WorkloadSpec{Replicas: 2, CPU: "3", Memory: "8Gi", GPU: "2"})
	require.Equal(t, map[string]bool{"g": true}, zonesOf("train", 3), "the GPU gang finds its GPUs with cpu beside them\n%s", s.tl)
	s.tl.add("train bound in zone g")

	report := gang("report", 3, 3, cluster.WorkloadSpec{Replicas: 1, CPU: "1", Memory: "2Gi"}, cluster.WorkloadSpec{Replicas: 2, CPU: "4", Memory: "8Gi"})
	ev, err := h.WaitForEvent(h.Ctx, "default", "report", string(reasons.WaitingForTopologyDomain), bindTimeout)
	require.NoError(t, err, "the PodGroup is told no zone has room\n%s", s.tl)
	require.Contains(t, ev.Note, "no topology.kubernetes.io/zone domain has room for the 3 members the group still needs (closest: g, 7 of 9 cpu free)")
	s.tl.add("report told: %s", ev.Note)
	s.waitJobs(3*bindTimeout, append(etl, train...)...)
	require.Len(t, zonesOf("report", 3), 1, "the waiting gang binds in one zone once room is freed\n%s", s.tl)
	s.waitJobs(3*bindTimeout, report...)
}

// A native gang lands under a stream of smaller work as a
// scheduler-plugins gang does (TestReservationLandsABigGangUnderAStream):
// 4 nodes of 8 GPUs run a stream of 1-GPU Jobs arriving faster than the
// cluster drains them; 10 s in, a native PodGroup of minCount 4 arrives,
// a Job of one cpu leader beside a Job of three 8-GPU workers, so it
// needs three whole nodes. kube-scheduler's pod-group cycle cannot place
// it; Gang's PodGroupPostFilter holds the room where its quorum fits
// soonest, says so on the native PodGroup (and kubectl flotilla why shows
// it), and the gang binds within 2.5 times the small pods' longest run of
// arriving while the stream goes on.
// No small pod is evicted and every Job completes.
func TestReservationLandsANativeGangUnderAStream(t *testing.T) {
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{ExtraAPIServerFlags: cluster.NativeGroupsAPIServerFlags})
	require.NoError(t, h.CreateNodes(h.Ctx, nodeSpecs("gpu", 4, cluster.NodeSpec{CPU: "64", Memory: "512Gi", Extended: map[corev1.ResourceName]string{cluster.GPU: "8"}})...))
	h.StartScheduler(reservingConfig(t), cluster.SchedulerOptions{Flags: []string{"--feature-gates=GenericWorkload=true"}})
	s := startScenario(t, h, placementInvariants...)
	s.native = true
	evicted := watchDeletedPods(t, h, "default")
	stop := make(chan struct{})
	streamed := streamOfSmallJobs(t, s, smallWork{podsPerSecond: 3.5}, stop)
	s.tl.add("stream of small Jobs started")
	time.Sleep(10 * time.Second)

	createNativeGroup(t, h, "big", "", 4, true)
	leader := createJob(t, h, nativeJob(cluster.WorkloadSpec{Name: "big-leader", Replicas: 1, CPU: "8", Memory: "32Gi", RunSeconds: 20}, "big"))
	workers := createJob(t, h, nativeJob(cluster.WorkloadSpec{Name: "big-worker", Replicas: 3, CPU: "16", Memory: "128Gi", GPU: "8", RunSeconds: 20, Indexed: true}, "big"))
	arrived := time.Now()
	s.tl.add("native gang big arrived: a cpu leader and three 8-GPU workers")

	// While it holds room, kubectl flotilla why shows the held nodes and
	// what still runs there.
	require.Eventually(t, func() bool { return groupEvent(t, h, "big", "RoomHeld") != "" }, 30*time.Second, 250*time.Millisecond,
		"the native PodGroup says it holds room\n%s", s.tl)
	why := kubectlFlotillaWhy(t, h, "podgroups.scheduling.k8s.io/big")
	require.Len(t, why, 1)
	require.True(t, why[0].Waiting, "the gang waits while it holds room: %+v", why[0])
	require.NotNil(t, why[0].Held, "why shows the room the native gang holds: %+v", why[0])
	assert.Len(t, why[0].Held.Running, len(why[0].Held.Nodes), "what runs on each held node")

	// The small pods' longest run is 16 s: the gang binds within 40 s.
	const bound = 40 * time.Second
	bound4, err := h.WaitForPodsBound(h.Ctx, "default", "batch.kubernetes.io/job-name in (big-leader, big-worker)", 4, bound-time.Since(arrived))
	waited := time.Since(arrived)
	require.NoError(t, err, "native gang big bound within %s of arriving, under the stream\n%s", bound, s.tl)
	s.tl.add("native gang big bound after %s: %v", waited.Round(100*time.Millisecond), bound4)
	held := groupEvent(t, h, "big", "RoomHeld")
	assert.Contains(t, held, "gang default/big (scheduling.k8s.io) holds room on ", "the native PodGroup says it holds room\n%s", s.tl)
	assert.GreaterOrEqual(t, len(heldNodes(held)), 3, "the gang held its three workers' nodes: %q", held)

	time.Sleep(5 * time.Second)
	close(stop)
	jobs := streamed()
	t.Logf("%d small Jobs streamed; native gang big bound %s after it arrived", len(jobs), waited.Round(100*time.Millisecond))
	s.waitJobs(3*time.Minute, append(jobs, leader, workers)...)
	assert.Empty(t, evicted.all(), "no small pod is evicted for the gang")
}
