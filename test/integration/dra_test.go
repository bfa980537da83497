package integration

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// Devices from Dynamic Resource Allocation: the nodes have no GPU in
// allocatable; a driver publishes each node's devices in a ResourceSlice,
// and pods ask for them by an extended resource a DeviceClass serves or
// by a claim made from a ResourceClaimTemplate. The gang's quorum check
// and plans must count those devices (see plugins/state/devices).

const (
	draClassName   = "gpu.example.com"
	draExtendedGPU = corev1.ResourceName("example.com/gpu")
)

// startDRACluster starts the realistic substrate (with the resourceclaim
// controller) with nodes of 64 cpu whose devices the harness driver
// publishes, a DeviceClass serving example.com/gpu, and a claim template
// of one device.
func startDRACluster(t *testing.T, nodes, devicesPerNode int) (*scenario, []cluster.NodeSpec) {
	t.Helper()
	specs := nodeSpecs("gpu", nodes, cluster.NodeSpec{CPU: "64", Memory: "256Gi"})
	return startDRAClusterOn(t, specs, devicesPerNode), specs
}

// startDRAClusterOn is startDRACluster on nodes of the given specs.
func startDRAClusterOn(t *testing.T, specs []cluster.NodeSpec, devicesPerNode int) *scenario {
	t.Helper()
	h, s := startScenarioCluster(t, append(append([]invariant{}, placementInvariants...), invariant{kind: devicesAllocatedOnce}), specs...)
	require.NoError(t, h.CreateDeviceClass(h.Ctx, draClassName, string(draExtendedGPU)))
	for _, n := range specs {
		require.NoError(t, h.PublishDevices(h.Ctx, n.Name, devicesPerNode))
	}
	require.NoError(t, h.CreateClaimTemplate(h.Ctx, "default", "one-gpu", draClassName, 1))
	return s
}

// draGPU makes spec's pods ask for one DRA device, by extended resource
// or by claim template.
func draGPU(spec cluster.WorkloadSpec, byTemplate bool) cluster.WorkloadSpec {
	if byTemplate {
		spec.ClaimTemplate = "one-gpu"
	} else {
		spec.GPU, spec.GPUResource = "1", draExtendedGPU
	}
	return spec
}

// withClaimFrom gives the pod's container a claim made from the
// template, as a user's pod spec asks for devices.
func withClaimFrom(pod *corev1.Pod, template string) *corev1.Pod {
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "devices", ResourceClaimTemplateName: ptr.To(template)}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "devices"}}
	return pod
}

// The repro of the devices issue: 8 nodes × 8 devices, 10 Jobs × 16
// pods (1 cpu, 1Gi, one device each), one PodGroup of minMember 16 per
// Job, all created at once, each pod running 5 s. Four gangs fit at a
// time: three rounds, 15 s ideal. Every Job completes within three times
// that (beside the other tests of make test on 2 cores a run takes
// longer than alone; how fast is the benchmarks' to say), both ways of
// asking,
// with no device in two claims and nothing bound twice.
func TestDRAGangJobsComplete(t *testing.T) {
	for _, how := range []struct {
		name       string
		byTemplate bool
	}{{"extended resource", false}, {"claim template", true}} {
		t.Run(how.name, func(t *testing.T) {
			const nodes, devices, jobs, members, runSeconds = 8, 8, 10, 16, 5
			s, _ := startDRACluster(t, nodes, devices)
			rounds := (jobs + nodes*devices/members - 1) / (nodes * devices / members)
			ideal := time.Duration(rounds*runSeconds) * time.Second
			start := time.Now()
			var all []*batchv1.Job
			for j := 0; j < jobs; j++ {
				spec := draGPU(cluster.WorkloadSpec{Name: fmt.Sprintf("j%d", j), Replicas: members, CPU: "1", Memory: "1Gi", RunSeconds: runSeconds}, how.byTemplate)
				all = append(all, s.gangJob(spec, members))
			}
			deadline := start.Add(3 * ideal)
			for _, j := range all {
				s.waitJobs(max(time.Until(deadline), time.Second), j)
			}
			t.Logf("%d Jobs of %d DRA-device pods complete in %s (ideal %s)", jobs, members, time.Since(start).Round(100*time.Millisecond), ideal)
		})
	}
}

// Per-node fit: 4 nodes × 8 devices; fillers (one device each, by claim)
// leave 3, 3, 3 and 8 free, 17 in all. A gang of 4 pods × 4 devices has
// room for 2 members only (two on the node with 8): it waits with nothing
// bound and no device allocated to it. Once one device frees on two of the
// 3-free nodes, it places 4/4.
func TestDRAGangFitsDevicesPerNode(t *testing.T) {
	s, specs := startDRACluster(t, 4, 8)
	h := s.h
	require.NoError(t, h.CreateClaimTemplate(h.Ctx, "default", "four-gpus", draClassName, 4))
	fillers := map[string][]string{}
	for _, n := range specs[:3] {
		for i := 0; i < 5; i++ {
			pod := cluster.Pod(cluster.PodSpec{Name: fmt.Sprintf("filler-%s-%d", n.Name, i), CPU: "1", Memory: "1Gi"})
			pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: n.Name}
			withClaimFrom(pod, "one-gpu")
			_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, pod, metav1.CreateOptions{})
			require.NoError(t, err)
			fillers[n.Name] = append(fillers[n.Name], pod.Name)
		}
	}
	_, err := h.WaitForPodsBound(h.Ctx, "default", "", 15, bindTimeout)
	require.NoError(t, err, "fillers placed\n%s", s.tl)

	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "wide", 4))
	var members []string
	for i := 0; i < 4; i++ {
		pod := cluster.Pod(cluster.PodSpec{Name: fmt.Sprintf("wide-%d", i), CPU: "1", Memory: "1Gi", PodGroup: "wide"})
		withClaimFrom(pod, "four-gpus")
		_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
		members = append(members, pod.Name)
	}
	s.requireEveryMemberSaysWhy(members, memberSaysWhyWithin)
	s.assertGangHoldsNothingFor("wide", 8*time.Second, "with room for 2 of 4")
	// Why it waits, on the pod: the devices per node, and that evicting
	// the fillers (of its own priority) is not allowed.
	cond, err := h.WaitForPodUnschedulable(h.Ctx, "default", "wide-0", 10*time.Second)
	require.NoError(t, err)
	assert.Contains(t, cond.Message, "2 of the 4 members needed for minMember 4 fit")
	assert.Contains(t, cond.Message, "preemption cannot help")

	for _, n := range specs[:2] {
		require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, fillers[n.Name][0], metav1.DeleteOptions{}))
		s.tl.add("deleted filler %s", fillers[n.Name][0])
	}
	_, err = h.WaitForPodsBound(h.Ctx, "default", gangSelector+"wide", 4, 60*time.Second)
	require.NoError(t, err, "gang placed once a device freed on two nodes\n%s", s.tl)
}

// The allocator confirms what a count cannot judge: 2 nodes × 8 devices in
// two interconnect domains of 4 (a, b); fillers take one device of each
// domain on each node, leaving 6 free per node, 3 in each domain. A gang
// of 2 pods each asking for 4 devices of one domain (matchAttribute) fits
// by count (a member per node) but not by the allocator: it waits with
// nothing bound and says the free devices cannot serve its claims
// together, rather than planning members onto nodes whose Filter refuses
// them; the member it names cannot have its claims allocated on the nodes
// with room by count. Once one filler per node leaves, a domain of 4 frees on each node
// and the gang places 2/2.
func TestDRAGangWaitsUntilTheAllocatorCanSatisfyItsConstraints(t *testing.T) {
	s, specs := startDRACluster(t, 2, 8)
	h := s.h
	templates, sameDomain := createDomainTemplates(t, h)

	var leaving []string
	for _, n := range specs {
		for _, domain := range []string{"a", "b"} {
			pod := withClaimFrom(cluster.Pod(cluster.PodSpec{Name: fmt.Sprintf("filler-%s-%s", n.Name, domain), CPU: "1", Memory: "1Gi"}), templates[domain])
			pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: n.Name}
			_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, pod, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		leaving = append(leaving, fmt.Sprintf("filler-%s-a", n.Name))
	}
	_, err := h.WaitForPodsBound(h.Ctx, "default", "", 4, bindTimeout)
	require.NoError(t, err, "fillers placed\n%s", s.tl)

	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "island", 2))
	for i := 0; i < 2; i++ {
		pod := withClaimFrom(cluster.Pod(cluster.PodSpec{Name: fmt.Sprintf("island-%d", i), CPU: "1", Memory: "1Gi", PodGroup: "island"}), sameDomain)
		_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		bound, _, err := h.BoundMembers(h.Ctx, "default", "island")
		require.NoError(t, err)
		require.Zero(t, bound, "gang island has bound members though no node has 4 free devices in one domain\n%s", s.tl)
		time.Sleep(200 * time.Millisecond)
	}
	cond, err := h.WaitForPodUnschedulable(h.Ctx, "default", "island-0", 10*time.Second)
	require.NoError(t, err)
	assert.Contains(t, cond.Message, "0 of the 2 members needed for minMember 2 fit")
	assert.Contains(t, cond.Message, "member island-0: its device claims cannot be allocated on 2 node(s) with room for it by count")

	for _, name := range leaving {
		require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, name, metav1.DeleteOptions{}))
		s.tl.add("deleted filler %s", name)
	}
	_, err = h.WaitForPodsBound(h.Ctx, "default", gangSelector+"island", 2, 60*time.Second)
	require.NoError(t, err, "gang placed once a domain of 4 freed on each node\n%s", s.tl)
}

// memberSaysWhyWithin bounds how long after the last member of a waiting
// gang is created every member has said why it waits: one attempt of the
// gang (its quorum check refuses each member it tries) plus the claim
// controller's claims and the scheduler's back-off on a loaded machine.
const memberSaysWhyWithin = 6 * time.Second

// requireEveryMemberSaysWhy waits until each of the pods has a False
// PodScheduled condition, and fails naming the ones still silent after
// within; it logs how long each took.
func (s *scenario) requireEveryMemberSaysWhy(pods []string, within time.Duration) {
	t, h := s.t, s.h
	t.Helper()
	start := time.Now()
	said := map[string]time.Duration{}
	for len(said) < len(pods) && time.Since(start) < within {
		for _, name := range pods {
			if _, ok := said[name]; ok {
				continue
			}
			pod, err := h.Client.CoreV1().Pods("default").Get(h.Ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			if c := cluster.PodScheduledCondition(pod); c != nil && c.Status == corev1.ConditionFalse {
				said[name] = time.Since(start)
				s.tl.add("member %s says why after %s: %s", name, said[name].Round(10*time.Millisecond), c.Message)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	var silent []string
	for _, name := range pods {
		if _, ok := said[name]; !ok {
			silent = append(silent, name)
		}
	}
	t.Logf("members' time to say why: %v", said)
	require.Empty(t, silent, "members with no PodScheduled condition %s after the gang was created\n%s", within, s.tl)
}

// assertGangHoldsNothingFor checks for a while that no member of the
// group (whose Job or pods are named after it) is bound and no claim of
// its members holds devices.
func (s *scenario) assertGangHoldsNothingFor(group string, d time.Duration, why string) {
	t, h := s.t, s.h
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		bound, _, err := h.BoundMembers(h.Ctx, "default", group)
		require.NoError(t, err)
		require.Zero(t, bound, "gang %s has bound members %s\n%s", group, why, s.tl)
		claims, err := h.Client.ResourceV1().ResourceClaims("default").List(h.Ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, c := range claims.Items {
			if strings.HasPrefix(c.Name, group+"-") && c.Status.Allocation != nil {
				t.Fatalf("claim %s of the waiting gang holds devices\n%s", c.Name, s.tl)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// createDomainTemplates creates the claim templates of the interconnect
// domain tests: one device in domain a or b (by a selector on the
// driver's domain attribute, as a user pins a pod to an NVLink island),
// by domain, and four devices of one domain (matchAttribute).
func createDomainTemplates(t *testing.T, h *harness.Harness) (inDomain map[string]string, fourInOneDomain string) {
	t.Helper()
	create := func(tmpl *resourcev1.ResourceClaimTemplate) string {
		_, err := h.Client.ResourceV1().ResourceClaimTemplates("default").Create(h.Ctx, tmpl, metav1.CreateOptions{})
		require.NoError(t, err)
		return tmpl.Name
	}
	inDomain = map[string]string{}
	for _, domain := range []string{"a", "b"} {
		tmpl := cluster.ClaimTemplate("default", "in-"+domain, draClassName, 1)
		tmpl.Spec.Spec.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.attributes[%q].domain == %q`, cluster.DRADriver, domain),
		}}}
		inDomain[domain] = create(tmpl)
	}
	sameDomain := cluster.ClaimTemplate("default", "four-in-one-domain", draClassName, 4)
	sameDomain.Spec.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{
		MatchAttribute: ptr.To(resourcev1.FullyQualifiedName(cluster.DRADriver + "/domain")),
	}}
	return inDomain, create(sameDomain)
}

// A Queue's capability caps devices asked for by claim: capability
// example.com/gpu 16 (the class's extended resource name), 3 gangs of 8
// pods of one device each (claim template) on 32 devices: never more than
// 16 of the queue's devices allocated; two gangs run, then the third.
func TestDRAQueueCapabilityCapsClaimedDevices(t *testing.T) {
	s, _ := startDRACluster(t, 4, 8)
	h := s.h
	capped := cluster.Queue("capped", 1, "")
	capped.Spec.Capability = corev1.ResourceList{draExtendedGPU: resource.MustParse("16")}
	require.NoError(t, h.CreateQueue(h.Ctx, capped))

	var most atomic.Int64
	ctx, stop := context.WithCancel(h.Ctx)
	defer stop()
	go func() {
		for ctx.Err() == nil {
			claims, err := h.Client.ResourceV1().ResourceClaims("default").List(ctx, metav1.ListOptions{})
			if err == nil {
				var held int64
				for _, c := range claims.Items {
					if c.Status.Allocation != nil {
						held += int64(len(c.Status.Allocation.Devices.Results))
					}
				}
				if held > most.Load() {
					most.Store(held)
					s.tl.add("queue capped holds %d devices", held)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	var jobs []*batchv1.Job
	for j := 0; j < 3; j++ {
		spec := draGPU(cluster.WorkloadSpec{Name: fmt.Sprintf("capped-%d", j), Replicas: 8, CPU: "1", Memory: "1Gi", RunSeconds: 5, Queue: "capped"}, true)
		jobs = append(jobs, s.gangJob(spec, 8))
	}
	deadline := time.Now().Add(90 * time.Second)
	for _, j := range jobs {
		s.waitJobs(max(time.Until(deadline), time.Second), j)
	}
	stop()
	require.LessOrEqual(t, most.Load(), int64(16), "devices held by the capped queue\n%s", s.tl)
	require.Equal(t, int64(16), most.Load(), "two gangs ran side by side\n%s", s.tl)
}

// A ResourceClaim two pods share counts once in their queue: a queue of
// capability example.com/gpu 2, one claim of 2 devices used by two pods.
// Both run (charged 2 devices, not 4), and the Queue's status shows 2
// allocated. A pod asking for the class by its implicit name
// (deviceclass.resource.kubernetes.io/gpu.example.com) is charged under
// example.com/gpu: it waits while the pair holds the queue's 2, and runs,
// shown as example.com/gpu, once they are gone.
func TestDRASharedClaimCountsOnceInItsQueue(t *testing.T) {
	s, _ := startDRACluster(t, 2, 8)
	h := s.h
	capped := cluster.Queue("pair", 1, "")
	capped.Spec.Capability = corev1.ResourceList{draExtendedGPU: resource.MustParse("2")}
	require.NoError(t, h.CreateQueue(h.Ctx, capped))
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pair-gpus"},
		Spec: cluster.ClaimTemplate("default", "", draClassName, 2).Spec.Spec}
	_, err := h.Client.ResourceV1().ResourceClaims("default").Create(h.Ctx, claim, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := 0; i < 2; i++ {
		pod := cluster.Pod(cluster.PodSpec{Name: fmt.Sprintf("pair-%d", i), CPU: "1", Memory: "1Gi", Labels: map[string]string{flotillav1alpha1.QueueLabel: "pair"}})
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: ptr.To(claim.Name)}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
		_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err = h.WaitForPodsBound(h.Ctx, "default", "", 2, 60*time.Second)
	require.NoError(t, err, "both pods of the shared claim bound within the queue's 2 devices\n%s", s.tl)
	s.assertQueueAllocates("pair", draExtendedGPU, 2, "the shared claim's 2 devices allocated once")

	implicit := corev1.ResourceName(resourcev1.ResourceDeviceClassPrefix + draClassName)
	byImplicitName := cluster.Pod(cluster.PodSpec{Name: "implicit", CPU: "1", Memory: "1Gi", Extended: map[corev1.ResourceName]string{implicit: "1"},
		Labels: map[string]string{flotillav1alpha1.QueueLabel: "pair", "asks": "implicit-name"}})
	_, err = h.Client.CoreV1().Pods("default").Create(h.Ctx, byImplicitName, metav1.CreateOptions{})
	require.NoError(t, err)
	assertStaysPending(t, h, "implicit", 5*time.Second) // queue pair's 2 example.com/gpu are the pair's
	for i := 0; i < 2; i++ {
		require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, fmt.Sprintf("pair-%d", i), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	}
	require.NoError(t, h.Client.ResourceV1().ResourceClaims("default").Delete(h.Ctx, claim.Name, metav1.DeleteOptions{}))
	_, err = h.WaitForPodsBound(h.Ctx, "default", "asks=implicit-name", 1, 60*time.Second)
	require.NoError(t, err, "the pod asking by the implicit name runs once the queue has room\n%s", s.tl)
	s.assertQueueAllocates("pair", draExtendedGPU, 1, "the implicit-name pod's device")
	q, err := h.GetQueue(h.Ctx, "pair")
	require.NoError(t, err)
	assert.NotContains(t, q.Status.Allocated, implicit, "the device is shown under the class's extended resource only")
}

// assertQueueAllocates waits until the Queue's status shows want of the
// resource allocated.
func (s *scenario) assertQueueAllocates(queue string, name corev1.ResourceName, want int64, what string) {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		q, err := s.h.GetQueue(s.h.Ctx, queue)
		if err != nil {
			return false
		}
		got := q.Status.Allocated[name]
		return got.Value() == want
	}, 30*time.Second, 200*time.Millisecond, "queue %s shows %d %s allocated (%s)\n%s", queue, want, name, what, s.tl)
}

// Device taints: a NoSchedule DeviceTaintRule on the devices of 2 of 8
// nodes (8 devices each). A gang of 6 members of 8 devices (48) runs; one
// of 7 (56) waits with nothing bound; the same 7 with a toleration run.
func TestDRADeviceTaintsLimitWhatAGangCounts(t *testing.T) {
	s, specs := startDRACluster(t, 8, 8)
	h := s.h
	for _, n := range specs[6:] {
		_, err := h.Client.ResourceV1().DeviceTaintRules().Create(h.Ctx, &resourcev1.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{Name: "maintenance-" + n.Name},
			Spec: resourcev1.DeviceTaintRuleSpec{
				DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(cluster.DRADriver), Pool: ptr.To(n.Name)},
				Taint:          resourcev1.DeviceTaint{Key: "example.com/maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, h.CreateClaimTemplate(h.Ctx, "default", "eight-gpus", draClassName, 8))
	tolerating := cluster.ClaimTemplate("default", "eight-gpus-tolerating", draClassName, 8)
	tolerating.Spec.Spec.Devices.Requests[0].Exactly.Tolerations = []resourcev1.DeviceToleration{{Key: "example.com/maintenance", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoSchedule}}
	_, err := h.Client.ResourceV1().ResourceClaimTemplates("default").Create(h.Ctx, tolerating, metav1.CreateOptions{})
	require.NoError(t, err)
	whole := func(name string, members int32, template string) *batchv1.Job {
		spec := cluster.WorkloadSpec{Name: name, Replicas: members, CPU: "1", Memory: "1Gi", RunSeconds: 3, ClaimTemplate: template}
		return s.gangJob(spec, members)
	}

	s.waitJobs(60*time.Second, whole("six", 6, "eight-gpus"))
	s.tl.add("gang of 48 devices done")
	seven := whole("seven", 7, "eight-gpus")
	assertNoneBoundFor(t, h, "seven", 8*time.Second)
	cond, err := h.WaitForPodUnschedulable(h.Ctx, "default", podOf(t, h, seven), 10*time.Second)
	require.NoError(t, err)
	assert.Contains(t, cond.Message, "needs 56 devices of class "+draClassName+": 48 free")
	s.waitJobs(60*time.Second, whole("seven-tolerating", 7, "eight-gpus-tolerating"))
	bound, _, err := h.BoundMembers(h.Ctx, "default", "seven")
	require.NoError(t, err)
	assert.Zero(t, bound, "the gang that does not tolerate the taint never partly placed\n%s", s.tl)
}

// A node's ResourceSlice deleted while a gang waits: 2 nodes of 8
// devices, one unpublished; a gang of 2 members of 8 devices waits with
// nothing bound; once the slice is published again it completes.
func TestDRAGangWaitsForUnpublishedDevices(t *testing.T) {
	s, specs := startDRACluster(t, 2, 8)
	h := s.h
	require.NoError(t, h.CreateClaimTemplate(h.Ctx, "default", "eight-gpus", draClassName, 8))
	require.NoError(t, h.UnpublishDevices(h.Ctx, specs[1].Name))
	s.tl.add("slice of %s deleted", specs[1].Name)
	job := s.gangJob(cluster.WorkloadSpec{Name: "pair", Replicas: 2, CPU: "1", Memory: "1Gi", RunSeconds: 3, ClaimTemplate: "eight-gpus"}, 2)
	assertNoneBoundFor(t, h, "pair", 6*time.Second)
	require.NoError(t, h.PublishDevices(h.Ctx, specs[1].Name, 8))
	s.tl.add("slice of %s published again", specs[1].Name)
	s.waitJobs(60*time.Second, job)
}

// podOf names one pod of the Job.
func podOf(t *testing.T, h *harness.Harness, job *batchv1.Job) string {
	t.Helper()
	var name string
	require.Eventually(t, func() bool {
		list, err := h.Client.CoreV1().Pods(job.Namespace).List(h.Ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
		if err != nil || len(list.Items) == 0 {
			return false
		}
		name = list.Items[0].Name
		return true
	}, 30*time.Second, 200*time.Millisecond)
	return name
}

// Preemption frees DRA devices: 2 nodes × 8 devices full with two
// low-priority Jobs of 8 pods (one device each, by claim template), one
// PodGroup each. A high-priority Job of 8 such pods evicts exactly one of
// the two gangs, whole, and binds 8/8 once that gang's claims are
// deallocated; the other gang's pods keep running, untouched. The
// scheduler's DRA state shows the victims' devices allocated until the
// resourceclaim controller deallocates their claims after the pods are
// gone: the plan counts them given back, and no second eviction starts
// meanwhile.
func TestDRAPreemptionEvictsOneGangForItsDevices(t *testing.T) {
	s, _ := startDRACluster(t, 2, 8)
	h := s.h
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "low", 10, false))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "high", 1000, false))
	deleted := watchDeletions(t, h)
	var low []*batchv1.Job
	for _, name := range []string{"low-a", "low-b"} {
		job := s.gangJob(draGPU(cluster.WorkloadSpec{Name: name, Replicas: 8, CPU: "1", Memory: "1Gi", PriorityClassName: "low", IgnoreDisruptions: true}, true), 8)
		s.waitRunning(job, 8, name+" running")
		low = append(low, job)
	}
	before := map[string]map[string]bool{}
	for _, job := range low {
		before[job.Name] = map[string]bool{}
		for _, p := range runningMembers(t, h, job) {
			before[job.Name][p.Name] = true
		}
	}

	high := s.gangJob(draGPU(cluster.WorkloadSpec{Name: "high", Replicas: 8, CPU: "1", Memory: "1Gi", PriorityClassName: "high", RunSeconds: 5}, true), 8)
	s.waitRunning(high, 8, "the high-priority gang runs 8/8 on the devices of one evicted gang")

	evicted := map[string]int{}
	for _, name := range deleted.names("low-") {
		for job := range before {
			if before[job][name] {
				evicted[job]++
			}
		}
	}
	require.Len(t, evicted, 1, "exactly one low gang is evicted: %v\n%s", evicted, s.tl)
	for job, n := range evicted {
		assert.Equal(t, 8, n, "gang %s is evicted whole\n%s", job, s.tl)
	}
	for _, job := range low {
		if evicted[job.Name] > 0 {
			continue
		}
		for _, p := range runningMembers(t, h, job) {
			assert.True(t, before[job.Name][p.Name], "gang %s untouched: %s is not one of its original pods\n%s", job.Name, p.Name, s.tl)
		}
		assert.Len(t, runningMembers(t, h, job), 8, "gang %s untouched\n%s", job.Name, s.tl)
	}
	assert.Zero(t, gangRejections(t, h, "high"), "a gang the cluster holds once room is made is never given up\n%s", s.tl)
	s.waitJobs(60*time.Second, high)
}

// A gang confined to one rack preempts for DRA devices inside one rack:
// 2 racks × 2 nodes × 4 devices; two low-priority gangs of 8 pods, one
// device each, each required in one rack, fill them. A high-priority
// gang of 8, required in one rack, evicts exactly one low gang, whole,
// and runs 8/8 in that gang's rack; the other gang is untouched.
func TestDRAPreemptionForAGangInOneRack(t *testing.T) {
	var specs []cluster.NodeSpec
	for _, r := range []string{"ra", "rb"} {
		for i := range 2 {
			specs = append(specs, cluster.NodeSpec{Name: fmt.Sprintf("%s-%d", r, i), CPU: "64", Memory: "256Gi", Labels: map[string]string{cluster.RackLabel: r}})
		}
	}
	s := startDRAClusterOn(t, specs, 4)
	h := s.h
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "low", 10, false))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "high", 1000, false))
	deleted := watchDeletions(t, h)
	rackOf := func(pods []corev1.Pod) map[string]int {
		racks := map[string]int{}
		for _, p := range pods {
			racks[strings.SplitN(p.Spec.NodeName, "-", 2)[0]]++
		}
		return racks
	}
	lowRack := map[string]string{}
	for _, name := range []string{"low-a", "low-b"} {
		job := s.gangJobIn(draGPU(cluster.WorkloadSpec{Name: name, Replicas: 8, CPU: "1", Memory: "1Gi", PriorityClassName: "low", IgnoreDisruptions: true}, true), 8, cluster.RackLabel)
		racks := rackOf(s.waitRunning(job, 8, name+" running"))
		require.Len(t, racks, 1, "gang %s in one rack: %v\n%s", name, racks, s.tl)
		for r := range racks {
			lowRack[name] = r
		}
	}
	require.NotEqual(t, lowRack["low-a"], lowRack["low-b"], "each low gang fills a rack\n%s", s.tl)

	high := s.gangJobIn(draGPU(cluster.WorkloadSpec{Name: "high", Replicas: 8, CPU: "1", Memory: "1Gi", PriorityClassName: "high", RunSeconds: 5}, true), 8, cluster.RackLabel)
	highRacks := rackOf(s.waitRunning(high, 8, "the high-priority gang runs 8/8 in the rack of one evicted gang"))
	require.Len(t, highRacks, 1, "the high gang in one rack: %v\n%s", highRacks, s.tl)

	evicted := map[string]int{}
	for _, name := range deleted.names("low-") {
		evicted[strings.Join(strings.SplitN(name, "-", 3)[:2], "-")]++
	}
	require.Len(t, evicted, 1, "exactly one low gang is evicted: %v\n%s", evicted, s.tl)
	for job, n := range evicted {
		assert.Equal(t, 8, n, "gang %s is evicted whole\n%s", job, s.tl)
		_, in := highRacks[lowRack[job]]
		assert.True(t, in, "the high gang runs in the evicted gang's rack %s: %v\n%s", lowRack[job], highRacks, s.tl)
	}
	s.waitJobs(60*time.Second, high)
}

// A single pod preempts for DRA devices: one node of 8 devices full with
// 8 low-priority pods of one device each (a Job whose evicted pods come
// back); a high-priority pod asking for 4 devices by claim evicts exactly
// 4 of them, binds once their claims are deallocated, and completes; the
// other 4 keep running.
func TestDRAPreemptionEvictsTheFewestPodsForOnePod(t *testing.T) {
	s, _ := startDRACluster(t, 1, 8)
	h := s.h
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "low", 10, false))
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "high", 1000, false))
	require.NoError(t, h.CreateClaimTemplate(h.Ctx, "default", "four-gpus", draClassName, 4))
	deleted := watchDeletions(t, h)
	low, err := h.CreateJob(h.Ctx, draGPU(cluster.WorkloadSpec{Name: "low", Replicas: 8, CPU: "1", Memory: "1Gi", PriorityClassName: "low", IgnoreDisruptions: true}, true))
	require.NoError(t, err)
	s.waitRunning(low, 8, "low running on all 8 devices")
	before := map[string]bool{}
	for _, p := range runningMembers(t, h, low) {
		before[p.Name] = true
	}

	spec := cluster.WorkloadSpec{Name: "high", Replicas: 1, CPU: "1", Memory: "1Gi", PriorityClassName: "high", RunSeconds: 5, ClaimTemplate: "four-gpus"}
	high, err := h.CreateJob(h.Ctx, spec)
	require.NoError(t, err)
	s.waitRunning(high, 1, "the high-priority pod runs on the devices of 4 evicted pods")
	evicted := 0
	for _, name := range deleted.names("low-") {
		if before[name] {
			evicted++
		}
	}
	assert.Equal(t, 4, evicted, "the fewest pods that free 4 devices are evicted\n%s", s.tl)
	s.waitJobs(60*time.Second, high)
}

// Preemption confirms a plan with the allocator where a count of devices
// cannot judge the claim: one node, NVLink domains a and b of 4 devices,
// 8 low pods pinned one device each to a domain, priorities interleaved
// (a: 10, 30, 50, 70; b: 20, 40, 60, 80). A high pod asking for 4
// devices of one domain: the 4 cheapest by count (10, 20, 30, 40) free 2
// devices in each domain, which its claim cannot use. It evicts exactly 4
// pods, all of one domain, binds and completes; the other 4 keep running.
func TestDRAPreemptionEvictsOneDomainForAConstrainedClaim(t *testing.T) {
	s, _ := startDRACluster(t, 1, 8)
	h := s.h
	inDomain, fourInOneDomain := createDomainTemplates(t, h)
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "high", 1000, false))
	deleted := watchDeletions(t, h)
	domainOf := map[string]string{}
	for i, priority := range []int32{10, 20, 30, 40, 50, 60, 70, 80} {
		domain := []string{"a", "b"}[i%2]
		class := fmt.Sprintf("low-%d", priority)
		require.NoError(t, h.CreatePriorityClass(h.Ctx, class, priority, false))
		name := fmt.Sprintf("low-%s-%d", domain, priority)
		domainOf[name] = domain
		pod := withClaimFrom(cluster.Pod(cluster.PodSpec{Name: name, CPU: "1", Memory: "1Gi", PriorityClassName: class}), inDomain[domain])
		_, err := h.Client.CoreV1().Pods("default").Create(h.Ctx, pod, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := h.WaitForPodsBound(h.Ctx, "default", "", 8, bindTimeout)
	require.NoError(t, err, "low pods placed\n%s", s.tl)

	high, err := h.CreateJob(h.Ctx, cluster.WorkloadSpec{Name: "high", Replicas: 1, CPU: "1", Memory: "1Gi", PriorityClassName: "high", RunSeconds: 5, ClaimTemplate: fourInOneDomain})
	require.NoError(t, err)
	s.waitRunning(high, 1, "the high-priority pod runs on the devices of one domain's evicted pods")
	evicted := map[string]int{}
	for _, name := range deleted.names("low-") {
		evicted[domainOf[name]]++
	}
	assert.Len(t, evicted, 1, "victims from one domain only: %v\n%s", evicted, s.tl)
	for domain, n := range evicted {
		assert.Equal(t, 4, n, "domain %s's 4 pods evicted\n%s", domain, s.tl)
	}
	s.waitJobs(60*time.Second, high)
}
