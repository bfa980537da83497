package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/internal/flotillactl"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// kubectl flotilla, run as a user runs it (its kubeconfig, -n, -o json)
// against a cluster where gangs and pods wait for different reasons: each
// says its reason and shortfall; a running gang says where its members
// are; pending positions follow the scheduler's order; the queue tree
// shows shares; an object that does not exist is a clear error.
func TestKubectlFlotillaExplainsWhyPodsWait(t *testing.T) {
	h := startRealisticCluster(t, cpuNode("node-a"), cpuNode("node-b")) // 8 cpu, 32Gi each
	capped := cluster.Queue("capped", 1, "")
	capped.Spec.Capability = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	require.NoError(t, h.CreateQueue(h.Ctx, capped))
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("team", 1, "")))

	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := flotillactl.NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out}, "v0.0.0-test")
		cmd.SetArgs(append([]string{"--kubeconfig", h.KubeconfigPath}, args...))
		err := cmd.ExecuteContext(h.Ctx)
		return out.String(), err
	}
	why := func(args ...string) []flotillactl.Explanation {
		t.Helper()
		out, err := run(append([]string{"why", "-n", "default", "-o", "json"}, args...)...)
		require.NoError(t, err, out)
		var got []flotillactl.Explanation
		decodeItems(t, []byte(out), &got)
		return got
	}

	// A gang that runs: 2 of 1 cpu.
	createGangJob(t, h, cluster.WorkloadSpec{Name: "runs", Replicas: 2, CPU: "1", Memory: "1Gi", Queue: "team"}, 2, "")
	// A gang whose quorum fits no node: 3 of 6 cpu on two 8-cpu nodes.
	createGangJob(t, h, cluster.WorkloadSpec{Name: "too-big", Replicas: 3, CPU: "6", Memory: "1Gi", Queue: "team"}, 3, "")
	// A gang whose Job made fewer pods than its minMember, created a
	// second later (creation times count in seconds; equal ones go by
	// name, as in the scheduler's queue).
	time.Sleep(1100 * time.Millisecond)
	createGangJob(t, h, cluster.WorkloadSpec{Name: "short", Replicas: 2, CPU: "1", Memory: "1Gi", Queue: "team"}, 3, "")
	// A pod above its queue's capability, one in a queue that does not exist.
	require.NoError(t, h.CreatePods(h.Ctx,
		cluster.PodSpec{Name: "over-cap", CPU: "2", Memory: "1Gi", Labels: map[string]string{flotillav1alpha1.QueueLabel: "capped"}},
		cluster.PodSpec{Name: "lost", CPU: "1", Memory: "1Gi", Labels: map[string]string{flotillav1alpha1.QueueLabel: "ghost"}}))

	want := []struct {
		kind, name string
		reason     reasons.Reason
		shortfall  string
	}{
		{"job", "too-big", reasons.InsufficientResources, "members needed for minMember 3 fit"},
		{"podgroup", "short", reasons.WaitingForMembers, "has 2 of its minMember 3 pods"},
		{"pod", "over-cap", reasons.QueueCapability, "(2 > 1)"},
		{"pod", "lost", reasons.InvalidSpec, `queue "ghost" does not exist`},
	}
	for _, w := range want {
		var got []flotillactl.Explanation
		// The reason and its shortfall together: a Job makes its pods in
		// slow-start batches, so "has 1 of" comes before "has 2 of".
		require.Eventually(t, func() bool {
			got = why(w.kind, w.name)
			return len(got) == 1 && strings.Contains(strings.Join(got[0].Reasons, ","), string(w.reason)) && strings.Contains(got[0].Message, w.shortfall)
		}, bindTimeout, 500*time.Millisecond, "why %s %s gives %s with %q: %+v", w.kind, w.name, w.reason, w.shortfall, got)
		assert.True(t, got[0].Waiting, "%s %s", w.kind, w.name)
	}

	// The PodGroups say the same, in their waiting annotations.
	for name, want := range map[string]reasons.Reason{"too-big": reasons.InsufficientResources, "short": reasons.WaitingForMembers} {
		require.Eventually(t, func() bool {
			return waitingReason(t, h, name) == string(want)
		}, bindTimeout, 250*time.Millisecond, "PodGroup %s says %s; it says %q", name, want, waitingReason(t, h, name))
	}

	// The same as a user reads it.
	out, err := run("why", "-n", "default", "job", "too-big")
	require.NoError(t, err, out)
	t.Logf("kubectl flotilla why job too-big:\n%s", out)
	assert.Regexp(t, `(?m)^reason\s+InsufficientResources$`, out)
	// Its last events are its own pods' and its PodGroup's, none else.
	events := why("job", "too-big")[0].Events
	require.NotEmpty(t, events)
	for _, ev := range events {
		assert.True(t, strings.HasPrefix(ev.Object, "Pod/too-big-") || ev.Object == "PodGroup/too-big", "event of %s", ev.Object)
	}

	// The running gang: not waiting, each member on its node.
	var runs []flotillactl.Explanation
	require.Eventually(t, func() bool {
		runs = why("job", "runs")
		return len(runs) == 1 && len(runs[0].Placed) == 2
	}, bindTimeout, 500*time.Millisecond, "why job runs: %+v", runs)
	assert.False(t, runs[0].Waiting)
	assert.Equal(t, "gang", runs[0].Kind)
	assert.Equal(t, "team", runs[0].Queue)
	for pod, node := range runs[0].Placed {
		assert.Contains(t, []string{"node-a", "node-b"}, node, pod)
	}

	// pending: team's two waiting gangs in the scheduler's order (equal
	// priority: the older PodGroup first), each with its reason.
	out, err = run("pending", "-A", "--queue", "team")
	require.NoError(t, err, out)
	t.Logf("kubectl flotilla pending -A --queue team:\n%s", out)
	out, err = run("pending", "-A", "--queue", "team", "-o", "json")
	require.NoError(t, err, out)
	var pending []flotillactl.PendingEntry
	decodeItems(t, []byte(out), &pending)
	require.Len(t, pending, 2, out)
	assert.Equal(t, []string{"default/too-big", "default/short"}, []string{pending[0].Name, pending[1].Name})
	assert.Equal(t, []int{1, 2}, []int{pending[0].Position, pending[1].Position})
	assert.Equal(t, []string{string(reasons.InsufficientResources)}, pending[0].Reasons)
	assert.Equal(t, []string{string(reasons.WaitingForMembers)}, pending[1].Reasons)
	// The table as kubectl get prints one: without its header, and sorted
	// by a field of the rows (the older PodGroup first).
	out, err = run("pending", "-A", "--queue", "team", "--no-headers", "--sort-by", ".since")
	require.NoError(t, err, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	assert.NotContains(t, out, "QUEUE", "--no-headers")
	assert.Contains(t, lines[0], "default/too-big", out)
	assert.Contains(t, lines[1], "default/short", out)
	out, err = run("pending", "-A", "--queue", "team", "--sort-by", ".priority", "-o", "name")
	require.NoError(t, err, out)
	assert.Equal(t, "podgroup/too-big\npodgroup/short\n", out, "equal priorities keep the scheduler's order")
	// The Queue's status counts them, and names neither.
	var counted string
	require.Eventually(t, func() bool {
		q, err := h.GetQueue(h.Ctx, "team")
		require.NoError(t, err)
		counted = fmt.Sprintf("pending gangs %d, pending pods %d", q.Status.PendingGangs, q.Status.PendingPods)
		return q.Status.PendingGangs == 2 && q.Status.PendingPods == 0
	}, bindTimeout, 250*time.Millisecond, "queue team's status counts its waiting gangs: %s", &counted)

	// queues: the tree with shares per resource, as a table.
	out, err = run("queues")
	require.NoError(t, err, out)
	t.Logf("kubectl flotilla queues:\n%s", out)
	assert.Contains(t, out, "QUEUE")
	for _, q := range []string{"capped", "team"} {
		assert.Contains(t, out, q)
	}
	require.Eventually(t, func() bool {
		out, err = run("queues", "-o", "json")
		require.NoError(t, err, out)
		var rows []flotillactl.QueueRow
		decodeItems(t, []byte(out), &rows)
		for _, r := range rows {
			if r.Queue == "capped" && r.Resource == "cpu" {
				return r.Capability == "1" && r.PendingGangs == 0 && r.Valid
			}
		}
		return false
	}, bindTimeout, 500*time.Millisecond, "queue capped's cpu row: %s", out)

	// A reason stops being said once it stops being true: short's
	// minMember lowered to the pods it has, it runs and says nothing more.
	_, err = h.PodGroups.SchedulingV1alpha1().PodGroups("default").Patch(h.Ctx, "short", types.MergePatchType, []byte(`{"spec":{"minMember":2}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got := why("podgroup", "short")
		return len(got) == 1 && !got[0].Waiting && waitingReason(t, h, "short") == "" && !hasWaitingMessage(t, h, "short")
	}, bindTimeout, 250*time.Millisecond, "PodGroup short, placed, still says %q", waitingReason(t, h, "short"))
	assert.Equal(t, string(reasons.InsufficientResources), waitingReason(t, h, "too-big"), "the gang that still waits still says why")

	// TYPE/NAME as kubectl takes it, and a short name.
	slash := why("job/too-big")
	require.Len(t, slash, 1)
	assert.Equal(t, "default/too-big", slash[0].Name)
	require.NotEmpty(t, why("po/over-cap"))

	// An owner chain as JobSet makes it (JobSet, its Job, the Job's pods),
	// found by owner references through a kind kubectl flotilla has no
	// code for: the JobSet's pods wait as the gang they are.
	jobSet := installJobSetShapedCRD(t, h)
	js, err := h.Dynamic.Resource(jobSet).Namespace("default").Create(h.Ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": map[string]any{"name": "trainer"},
		"spec": map[string]any{"replicatedJobs": []any{map[string]any{"name": "workers", "replicas": int64(1)}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, h.CreatePodGroup(h.Ctx, "default", "trainer", 2))
	job := cluster.Job(cluster.WorkloadSpec{Name: "trainer-workers-0", Replicas: 2, CPU: "6", Memory: "1Gi", Queue: "team", PodGroup: "trainer"})
	job.OwnerReferences = []metav1.OwnerReference{{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: "trainer", UID: js.GetUID(), Controller: ptr.To(true)}}
	_, err = h.Client.BatchV1().Jobs("default").Create(h.Ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	var trainer []flotillactl.Explanation
	require.Eventually(t, func() bool {
		out, err := run("why", "-n", "default", "-o", "json", "jobset/trainer")
		if err != nil {
			return false // the Job has made no pods yet
		}
		trainer = nil
		decodeItems(t, []byte(out), &trainer)
		return len(trainer) == 1 && len(trainer[0].Pending)+len(trainer[0].Placed) == 2
	}, bindTimeout, 250*time.Millisecond, "why jobset/trainer: %+v", trainer)
	assert.Equal(t, "default/trainer", trainer[0].Name, "the JobSet's pods are the trainer gang")

	// What does not exist says so.
	_, err = run("why", "-n", "default", "job", "no-such-job")
	require.EqualError(t, err, "Job default/no-such-job not found")
	_, err = run("why", "-n", "default", "jobset/no-such-jobset")
	require.EqualError(t, err, "JobSet default/no-such-jobset not found")
	_, err = run("why", "-n", "default", "flurb", "x")
	require.ErrorContains(t, err, `not "flurb"`)
	_, err = run("why", "-n", "default", "job/")
	require.ErrorContains(t, err, "TYPE NAME or TYPE/NAME")

	// The version its build stamped.
	out, err = run("version", "-o", "json")
	require.NoError(t, err, out)
	var version []flotillactl.Version
	decodeItems(t, []byte(out), &version)
	require.Len(t, version, 1, out)
	assert.Equal(t, "v0.0.0-test", version[0].Version)
}

// installJobSetShapedCRD serves a JobSet kind (jobset.x-k8s.io, whose
// module is not served here): only its owner chain matters.
func installJobSetShapedCRD(t *testing.T, h *harness.Harness) schema.GroupVersionResource {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "jobsets.jobset.x-k8s.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "jobset.x-k8s.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "jobsets", Singular: "jobset", Kind: "JobSet", ListKind: "JobSetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha2", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	_, err := apiextensionsclient.NewForConfigOrDie(h.Config).ApiextensionsV1().CustomResourceDefinitions().Create(h.Ctx, crd, metav1.CreateOptions{})
	require.NoError(t, err)
	gvr := schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	require.Eventually(t, func() bool {
		_, err := h.Dynamic.Resource(gvr).Namespace("default").List(h.Ctx, metav1.ListOptions{})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the JobSet API is served")
	return gvr
}

// A tenant bound to the built-in view role in one namespace only (the
// chart's tenant roles aggregated into it) and allowed to get and list
// Queues lists its namespace's pending work with pending -n, and is
// refused -A; nothing flotilla writes where it may read names another
// namespace's workloads: not the Queues' status, which counts what waits
// in them (another namespace's pod waits in the same queue), nor the event
// on its pod that another namespace's pod preempted.
func TestKubectlFlotillaPendingAsANamespaceTenant(t *testing.T) {
	h := harness.Start(t, cluster.ControlPlaneOptions{ExtraAPIServerFlags: append([]string{"--authorization-mode=RBAC"}, cluster.RealisticAPIServerFlags...)})
	// Jobs, and the controller that folds the chart's tenant roles into
	// view.
	require.NoError(t, h.StartControllers(h.Ctx, t, append(slices.Clone(cluster.JobControllers), "clusterrole-aggregation-controller")...))
	require.NoError(t, h.StartKubelets(h.Ctx, t, cluster.KubeletOptions{}))
	data, err := manifests.File("rbac-tenants.yaml")
	require.NoError(t, err)
	_, err = h.Apply(h.Ctx, data)
	require.NoError(t, err)
	require.NoError(t, h.CreateNodes(h.Ctx, cpuNode("node-a")))
	h.StartScheduler(shippedConfig(t, "scheduler-config.yaml"), cluster.SchedulerOptions{})
	_, err = h.Client.CoreV1().Namespaces().Create(h.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.Client.RbacV1().RoleBindings("team").Create(h.Ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.Client.RbacV1().ClusterRoles().Create(h.Ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "queue-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{flotillav1alpha1.GroupName}, Resources: []string{"queues"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.Client.RbacV1().ClusterRoleBindings().Create(h.Ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-reads-queues"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "queue-reader"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue("default", 1, "")))
	// A gang of the team that cannot fit (2 of 6 cpu on one 8-cpu node),
	// and a pod elsewhere the tenant must not see.
	require.NoError(t, h.CreatePodGroup(h.Ctx, "team", "big", 2))
	_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Namespace: "team", Name: "big", Replicas: 2, CPU: "6", Memory: "1Gi", PodGroup: "big"})
	require.NoError(t, err)
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "elsewhere", CPU: "100", Memory: "1Gi"}))

	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		cmd := flotillactl.NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out}, "v0.0.0-test")
		cmd.SetArgs(append([]string{"--kubeconfig", h.KubeconfigPath, "--as", "tenant"}, args...))
		err := cmd.ExecuteContext(h.Ctx)
		return out.String(), err
	}
	// The Job creates its two pods one after the other: until the second
	// exists the gang waits for members (WaitingForMembers), a true
	// reason for that moment; then it waits for room.
	var pending []flotillactl.PendingEntry
	require.Eventually(t, func() bool {
		out, err := run("pending", "-n", "team", "-o", "json")
		require.NoError(t, err, out)
		pending = nil
		decodeItems(t, []byte(out), &pending)
		return len(pending) == 1 && slices.Equal(pending[0].Reasons, []string{string(reasons.InsufficientResources)})
	}, bindTimeout, 250*time.Millisecond, "the tenant's gang waits for room, and says so: %+v", &pending)
	assert.Equal(t, "team/big", pending[0].Name)
	assert.Equal(t, 1, pending[0].Position)
	out, err := run("why", "-n", "team", "job/big", "-o", "json")
	require.NoError(t, err, out)
	_, err = run("pending", "-A")
	require.Error(t, err, "view in one namespace lists no pods cluster-wide")
	require.Contains(t, err.Error(), "forbidden")

	// Another namespace's pod of higher priority preempts the team's.
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "urgent", 1000, false))
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Namespace: "team", Name: "low", CPU: "2", Memory: "1Gi"}))
	require.Eventually(t, func() bool {
		low, err := h.Client.CoreV1().Pods("team").Get(h.Ctx, "low", metav1.GetOptions{})
		require.NoError(t, err)
		return low.Spec.NodeName != ""
	}, bindTimeout, 100*time.Millisecond, "team/low binds")
	require.NoError(t, h.CreatePods(h.Ctx, cluster.PodSpec{Name: "urgent-rival", CPU: "7", Memory: "1Gi", PriorityClassName: "urgent"}))

	tenantConfig := rest.CopyConfig(h.Config)
	tenantConfig.Impersonate = rest.ImpersonationConfig{UserName: "tenant"}
	tenant, err := kubernetes.NewForConfig(tenantConfig)
	require.NoError(t, err)
	var preempted *corev1.Event
	require.Eventually(t, func() bool {
		events, err := tenant.CoreV1().Events("team").List(h.Ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=low"})
		require.NoError(t, err)
		for i := range events.Items {
			if events.Items[i].Reason == "Preempted" {
				preempted = &events.Items[i]
			}
		}
		return preempted != nil
	}, bindTimeout, 250*time.Millisecond, "the team reads why its pod was preempted")
	assert.Contains(t, preempted.Message, "preempted by a pod of another namespace (priority 1000)")
	assert.NotContains(t, preempted.Message, "urgent-rival")
	assert.Nil(t, preempted.Related, "the event relates no object the team may not read")

	// The Queues, as the tenant reads them: counts, no names, though
	// default/elsewhere waits in the same queue as the team's gang.
	tenantDynamic, err := dynamic.NewForConfig(tenantConfig)
	require.NoError(t, err)
	var queuesRead []byte
	require.Eventually(t, func() bool {
		list, err := tenantDynamic.Resource(flotillav1alpha1.QueueResource).List(h.Ctx, metav1.ListOptions{})
		require.NoError(t, err)
		queuesRead, err = json.Marshal(list)
		require.NoError(t, err)
		for _, q := range list.Items {
			if pods, _, _ := unstructured.NestedInt64(q.Object, "status", "pendingPods"); q.GetName() == "default" && pods >= 1 {
				return true
			}
		}
		return false
	}, bindTimeout, 250*time.Millisecond, "the default queue counts default/elsewhere: %s", &queuesRead)
	for _, name := range []string{"elsewhere", "urgent-rival", "big"} {
		assert.NotContains(t, string(queuesRead), name, "a Queue names a workload")
	}
}

func podGroupAnnotations(t *testing.T, h *harness.Harness, name string) map[string]string {
	t.Helper()
	pg, err := h.PodGroups.SchedulingV1alpha1().PodGroups("default").Get(h.Ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	return pg.Annotations
}

// waitingReason is the reason a PodGroup's waiting annotation gives.
func waitingReason(t *testing.T, h *harness.Harness, name string) string {
	return podGroupAnnotations(t, h, name)[flotillav1alpha1.WaitingReasonAnnotation]
}

func hasWaitingMessage(t *testing.T, h *harness.Harness, name string) bool {
	_, ok := podGroupAnnotations(t, h, name)[flotillav1alpha1.WaitingMessageAnnotation]
	return ok
}

// The positions kubectl flotilla pending gives are the order in which the
// scheduler then admits the gangs: in a queue that holds one gang at a
// time, a later gang of higher priority goes before an older one of lower
// priority, and both go after the running one.
func TestPendingPositionsAreTheAdmissionOrder(t *testing.T) {
	h := startRealisticCluster(t, cpuNode("node-a"), cpuNode("node-b")) // 8 cpu, 32Gi each
	line := cluster.Queue("line", 1, "")
	line.Spec.Capability = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	require.NoError(t, h.CreateQueue(h.Ctx, line))
	// preemptionPolicy Never: the urgent gang waits its turn rather than
	// evicting the running one.
	require.NoError(t, h.CreatePriorityClass(h.Ctx, "urgent", 100, true))

	gang := func(name string, runSeconds float64, priorityClass string) {
		createGangJob(t, h, cluster.WorkloadSpec{Name: name, Replicas: 2, CPU: "1", Memory: "1Gi", Queue: "line",
			RunSeconds: runSeconds, PriorityClassName: priorityClass}, 2, "")
	}
	gang("first", 10, "")
	require.Eventually(t, func() bool {
		bound, _, err := h.BoundMembers(h.Ctx, "default", "first")
		require.NoError(t, err)
		return bound == 2
	}, bindTimeout, 100*time.Millisecond, "the first gang takes the queue's capability")
	gang("older", 2, "")
	// Creation times count in seconds.
	time.Sleep(1100 * time.Millisecond)
	gang("urgent", 2, "urgent")

	var pending []flotillactl.PendingEntry
	require.Eventually(t, func() bool {
		var out bytes.Buffer
		cmd := flotillactl.NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out}, "v0.0.0-test")
		cmd.SetArgs([]string{"--kubeconfig", h.KubeconfigPath, "pending", "-A", "--queue", "line", "-o", "json"})
		require.NoError(t, cmd.ExecuteContext(h.Ctx), out.String())
		pending = nil
		decodeItems(t, out.Bytes(), &pending)
		// A gang waits for its members until the Job controller has made
		// both (its slow start makes one, then the other): wait until
		// both gangs wait for the queue alone.
		if len(pending) != 2 {
			return false
		}
		for _, p := range pending {
			if !slices.Equal(p.Reasons, []string{string(reasons.QueueCapability)}) {
				return false
			}
		}
		return true
	}, bindTimeout, 250*time.Millisecond, "both gangs wait behind the first for the queue's capability: %+v", pending)
	assert.Equal(t, []string{"default/urgent", "default/older"}, []string{pending[0].Name, pending[1].Name}, "positions")

	// Admitted in that order: each gang's first bind after the one before.
	firstBound := func(name string) time.Time {
		pods, err := h.Client.CoreV1().Pods("default").List(h.Ctx, metav1.ListOptions{LabelSelector: gangSelector + name})
		require.NoError(t, err)
		var first time.Time
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && (first.IsZero() || c.LastTransitionTime.Before(&metav1.Time{Time: first})) {
					first = c.LastTransitionTime.Time
				}
			}
		}
		return first
	}
	require.Eventually(t, func() bool {
		return !firstBound("urgent").IsZero() && !firstBound("older").IsZero()
	}, 3*bindTimeout, 250*time.Millisecond, "both gangs are admitted once the first finishes")
	assert.True(t, firstBound("first").Before(firstBound("urgent")), "first before urgent")
	assert.True(t, firstBound("urgent").Before(firstBound("older")), "urgent (position 1) before older (position 2): %s vs %s",
		firstBound("urgent"), firstBound("older"))
}

// decodeItems reads -o json's v1 List into a slice of its rows.
func decodeItems(t *testing.T, out []byte, into any) {
	t.Helper()
	var list struct {
		Kind  string          `json:"kind"`
		Items json.RawMessage `json:"items"`
	}
	require.NoError(t, json.Unmarshal(out, &list), "%s", out)
	require.Equal(t, "List", list.Kind, "%s", out)
	if len(list.Items) == 0 || string(list.Items) == "null" {
		list.Items = []byte("[]")
	}
	require.NoError(t, json.Unmarshal(list.Items, into), "%s", out)
}
