package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests/chart"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// The job frameworks that make scheduler-plugins PodGroups for their users,
// replayed: each test object is what the framework's released controller
// creates (PodGroup name, minMember, minResources, owner references; the
// pods' labels, schedulerName, and whether they come as Jobs or bare
// pods), and each pod's life is played as the framework plays it. The
// frameworks' own kinds (TrainJob, JobSet, RayCluster, SparkApplication,
// MPIJob) are served by schema-less CRDs, so that every owner reference
// names a real object and the garbage collector cleans up after them as
// on a real cluster. docs/integrations.md says, per framework, what a user
// sets and what flotilla then does.
//
// Sources (the controllers that build these objects):
//   - Kubeflow Trainer v2, pkg/runtime/framework/plugins/coscheduling:
//     PodGroup <trainjob>, minMember and minResources summed over the
//     runtime's pod sets, scheduleTimeoutSeconds from the runtime, owned
//     by the TrainJob (controller); pods labelled with the PodGroup through
//     the JobSet's Jobs.
//   - KubeRay >= 1.4, batchscheduler/scheduler-plugins: PodGroup <cluster>,
//     minMember workers + 1, minResources of head and workers, owned by
//     the RayCluster (not as controller); the pods, bare, labelled with it
//     when the RayCluster has ray.io/gang-scheduling-enabled, and with
//     schedulerName scheduler-plugins-scheduler, hard-coded.
//   - Spark operator v2, internal/scheduler/kubescheduler: PodGroup
//     <app>-pg, minMember 1, minResources of the driver and every
//     executor, owned by the SparkApplication; the driver labelled with it,
//     and the executors the driver creates.
//   - MPI operator v2 (--gang-scheduling), podgroup.go: PodGroup <mpijob>,
//     minMember workers + 1, scheduleTimeoutSeconds 0, minResources of
//     launcher and workers; the launcher a Job, the workers bare pods.
func TestFrameworksDropIn(t *testing.T) {
	h := harness.StartRealistic(t, cluster.ControlPlaneOptions{})
	nodes := append(nodeSpecs("cpu", 2, cluster.NodeSpec{CPU: "8", Memory: "32Gi"}),
		nodeSpecs("gpu", 2, cluster.NodeSpec{CPU: "32", Memory: "128Gi", Extended: map[corev1.ResourceName]string{cluster.GPU: "8"}})...)
	require.NoError(t, h.CreateNodes(h.Ctx, nodes...))
	// KubeRay's pods ask for scheduler-plugins-scheduler: the chart's
	// alias serves them from the same binary and cache.
	config, err := chart.SchedulerConfig(map[string]any{"schedulerNameAliases": []any{kubeRaySchedulerName}})
	require.NoError(t, err)
	h.StartScheduler(config, cluster.SchedulerOptions{})
	s := startScenario(t, h, placementInvariants...)

	_, err = h.Apply(h.Ctx, []byte(frameworkCRDs))
	require.NoError(t, err)
	// Each framework's users in their own namespace, which names their
	// queue: every gang joins it without a label of its own.
	for _, fw := range []string{"trainer", "ray", "spark", "mpi"} {
		require.NoError(t, h.CreateQueue(h.Ctx, cluster.Queue(fw, 1, "")))
		_, err := h.Client.CoreV1().Namespaces().Create(h.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: fw + "-team", Labels: map[string]string{flotillav1alpha1.QueueLabel: fw}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	r := &replay{t: t, h: h, s: s}
	r.watchQueues()

	// Spark first, on a cluster with room for its driver but not for its
	// minResources (driver and executors: 3 cpu): the driver waits.
	fillers := []cluster.PodSpec{
		{Name: "filler-cpu-00", NodeName: "cpu-00", CPU: "6500m", Memory: "1Gi"},
		{Name: "filler-cpu-01", NodeName: "cpu-01", CPU: "7750m", Memory: "1Gi"},
		{Name: "filler-gpu-00", NodeName: "gpu-00", CPU: "31750m", Memory: "1Gi"},
		{Name: "filler-gpu-01", NodeName: "gpu-01", CPU: "31750m", Memory: "1Gi"},
	}
	require.NoError(t, h.CreatePods(h.Ctx, fillers...))
	spark := r.spark()
	driver := spark.driver
	time.Sleep(5 * time.Second)
	pod, err := h.Client.CoreV1().Pods(driver.Namespace).Get(h.Ctx, driver.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, pod.Spec.NodeName, "the driver was placed before its PodGroup's minResources fit\n%s", s.tl)
	cond := cluster.PodScheduledCondition(pod)
	require.NotNil(t, cond, "the waiting driver says why")
	require.Contains(t, cond.Message, "minResources", "the waiting driver says why")
	s.tl.add("spark driver waits for minResources: %s", cond.Message)
	for _, f := range fillers {
		require.NoError(t, h.Client.CoreV1().Pods("default").Delete(h.Ctx, f.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	}

	// Then every framework at once.
	done := map[string]func(){
		"trainer": r.trainer(),
		"ray":     r.ray(),
		"mpi":     r.mpi(),
		"spark":   func() { r.playSpark(spark) },
	}
	for _, fw := range []string{"spark", "trainer", "ray", "mpi"} {
		done[fw]()
		s.tl.add("%s: done", fw)
	}
}

const kubeRaySchedulerName = "scheduler-plugins-scheduler"

// frameworkCRDs serve the frameworks' own kinds with no schema: these
// tests make the objects the frameworks' controllers make from them.
var frameworkCRDs = func() string {
	var docs []string
	for _, k := range []struct{ group, version, kind, plural string }{
		{"trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs"},
		{"jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"},
		{"ray.io", "v1", "RayCluster", "rayclusters"},
		{"sparkoperator.k8s.io", "v1beta2", "SparkApplication", "sparkapplications"},
		{"kubeflow.org", "v2beta1", "MPIJob", "mpijobs"},
	} {
		docs = append(docs, fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[4]s.%[1]s
  # Groups under k8s.io need it; the Spark operator's CRD carries its own.
  annotations: {api-approved.kubernetes.io: "unapproved, a test's stand-in for the framework's CRD"}
spec:
  group: %[1]s
  scope: Namespaced
  names: {kind: %[3]s, plural: %[4]s, singular: %[5]s}
  versions:
  - name: %[2]s
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, k.group, k.version, k.kind, k.plural, strings.ToLower(k.kind)))
	}
	return strings.Join(docs, "---\n")
}()

// replay makes the frameworks' objects and plays their pods' lives.
type replay struct {
	t *testing.T
	h *harness.Harness
	s *scenario

	mu       sync.Mutex
	ranGangs map[string]bool // see watchQueues
}

// owner creates a framework's own object (through a CRD that may have just
// been made, so it retries until the API serves it) and returns it.
func (r *replay) owner(apiVersion, kind, namespace, name string, labels map[string]string, owners ...metav1.OwnerReference) *unstructured.Unstructured {
	r.t.Helper()
	gv, err := schema.ParseGroupVersion(apiVersion)
	require.NoError(r.t, err)
	gvr := gv.WithResource(strings.ToLower(kind) + "s")
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	obj.SetLabels(labels)
	obj.SetOwnerReferences(owners)
	var created *unstructured.Unstructured
	require.NoError(r.t, wait.PollUntilContextTimeout(r.h.Ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		created, err = r.h.Dynamic.Resource(gvr).Namespace(namespace).Create(ctx, obj, metav1.CreateOptions{})
		return err == nil, nil
	}), "create %s %s/%s: %v", kind, namespace, name, err)
	return created
}

// ref is an owner reference to obj.
func ref(obj metav1.Object, apiVersion, kind string, controller bool) metav1.OwnerReference {
	or := metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: obj.GetName(), UID: obj.GetUID()}
	if controller {
		or.Controller, or.BlockOwnerDeletion = ptr.To(true), ptr.To(true)
	}
	return or
}

// apply creates the objects, failing the test on an error.
func (r *replay) apply(objs ...any) {
	r.t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Pod:
			_, err = r.h.Client.CoreV1().Pods(o.Namespace).Create(r.h.Ctx, o, metav1.CreateOptions{})
		case *batchv1.Job:
			_, err = r.h.Client.BatchV1().Jobs(o.Namespace).Create(r.h.Ctx, o, metav1.CreateOptions{})
		case *schedv1alpha1.PodGroup:
			_, err = r.h.PodGroups.SchedulingV1alpha1().PodGroups(o.Namespace).Create(r.h.Ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("unexpected object %T", o)
		}
		require.NoError(r.t, err)
	}
}

// boundTogether bounds the time from a gang's first member seen bound to
// its quorum seen bound: members wait in Permit and are bound together.
const boundTogether = 3 * time.Second

// waitBoundTogether waits until n pods of the selector are bound and
// checks the gang went all or nothing: none of them was bound until all
// could be, so all were seen bound within boundTogether of the first.
func (r *replay) waitBoundTogether(namespace, selector string, n int, what string) []corev1.Pod {
	r.t.Helper()
	return r.waitBound(namespace, selector, n, what, true)
}

// waitBound waits until n pods of the selector are bound, together (see
// waitBoundTogether) or one by one.
func (r *replay) waitBound(namespace, selector string, n int, what string, together bool) []corev1.Pod {
	r.t.Helper()
	var pods []corev1.Pod
	var first time.Time
	require.Eventually(r.t, func() bool {
		list, err := r.h.Client.CoreV1().Pods(namespace).List(r.h.Ctx, metav1.ListOptions{LabelSelector: selector})
		require.NoError(r.t, err)
		pods = nil
		for _, p := range list.Items {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				pods = append(pods, p)
			}
		}
		if len(pods) > 0 && first.IsZero() {
			first = time.Now()
		}
		return len(pods) >= n
	}, 90*time.Second, 100*time.Millisecond, "%s: %d pods of %s bound\n%s", what, n, selector, r.s.tl)
	took := time.Since(first)
	r.s.tl.add("%s: %d pods bound, %s after the first", what, len(pods), took.Round(100*time.Millisecond))
	if together {
		require.LessOrEqual(r.t, took, boundTogether, "%s: bound one by one, not as a gang\n%s", what, r.s.tl)
	}
	return pods
}

// waitGone waits until no pod of the selector is left.
func (r *replay) waitGone(namespace, selector, what string) {
	r.t.Helper()
	require.Eventually(r.t, func() bool {
		list, err := r.h.Client.CoreV1().Pods(namespace).List(r.h.Ctx, metav1.ListOptions{LabelSelector: selector})
		require.NoError(r.t, err)
		return len(list.Items) == 0
	}, 60*time.Second, 250*time.Millisecond, "%s: pods of %s gone\n%s", what, selector, r.s.tl)
}

// watchQueues records, from now on, every queue whose status counted a
// running gang: a short job may be over before its test looks.
func (r *replay) watchQueues() {
	r.ranGangs = map[string]bool{}
	go func() {
		for r.h.Ctx.Err() == nil {
			list, err := r.h.Dynamic.Resource(flotillav1alpha1.QueueResource).List(r.h.Ctx, metav1.ListOptions{})
			if err == nil {
				for _, item := range list.Items {
					if n, _, _ := unstructured.NestedInt64(item.Object, "status", "runningGangs"); n > 0 {
						r.mu.Lock()
						r.ranGangs[item.GetName()] = true
						r.mu.Unlock()
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
}

// waitQueueRanGang waits until the queue's status has counted a running
// gang: the gang joined the queue its namespace names.
func (r *replay) waitQueueRanGang(queue string) {
	r.t.Helper()
	require.Eventually(r.t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.ranGangs[queue]
	}, 30*time.Second, 200*time.Millisecond, "queue %s counted the gang of its namespace\n%s", queue, r.s.tl)
}

func requests(cpu, memory string, gpus int) corev1.ResourceRequirements {
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	if gpus > 0 {
		list[cluster.GPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	return corev1.ResourceRequirements{Requests: list, Limits: list}
}

// waitDeleted waits until the object is gone from the API.
func (r *replay) waitDeleted(get func() error, what string) {
	r.t.Helper()
	require.Eventually(r.t, func() bool { return apierrors.IsNotFound(get()) }, 60*time.Second, 250*time.Millisecond, "%s deleted\n%s", what, r.s.tl)
}

// pod is a framework's pod: its labels, owners and containers as the
// framework makes them, and how long it runs here (0: until deleted).
func pod(namespace, name, schedulerName string, labels map[string]string, owners []metav1.OwnerReference, runSeconds float64, restart corev1.RestartPolicy, containers ...corev1.Container) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels, OwnerReferences: owners},
		Spec: corev1.PodSpec{SchedulerName: schedulerName, RestartPolicy: restart, Containers: containers,
			TerminationGracePeriodSeconds: ptr.To(int64(1))},
	}
	if runSeconds > 0 {
		p.Annotations = map[string]string{cluster.RunSecondsAnnotation: fmt.Sprint(runSeconds)}
	}
	return p
}

func container(name, image string, command []string, res corev1.ResourceRequirements) corev1.Container {
	return corev1.Container{Name: name, Image: image, Command: command, Resources: res}
}

func withLabels(base map[string]string, more ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(more); i += 2 {
		out[more[i]] = more[i+1]
	}
	return out
}

func resourceList(cpu, memory string, gpus int) corev1.ResourceList {
	return requests(cpu, memory, gpus).Requests
}

// trainer replays a TrainJob of a torch runtime with podGroupPolicy
// coscheduling (scheduleTimeoutSeconds 120) and 4 nodes of 1 GPU: the
// TrainJob's JobSet runs one Indexed Job of 4 pods.
func (r *replay) trainer() func() {
	const ns, name = "trainer-team", "llm"
	tj := r.owner("trainer.kubeflow.org/v1alpha1", "TrainJob", ns, name, nil)
	js := r.owner("jobset.x-k8s.io/v1alpha2", "JobSet", ns, name, map[string]string{"trainer.kubeflow.org/trainjob-name": name},
		ref(tj, "trainer.kubeflow.org/v1alpha1", "TrainJob", true))
	r.apply(&schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{ref(tj, "trainer.kubeflow.org/v1alpha1", "TrainJob", true)}},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: 4, MinResources: resourceList("8", "32Gi", 4), ScheduleTimeoutSeconds: ptr.To(int32(120))},
	})
	jobLabels := map[string]string{
		"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "node",
		"jobset.sigs.k8s.io/replicatedjob-replicas": "1", "jobset.sigs.k8s.io/job-index": "0",
	}
	template := pod(ns, "", cluster.FlotillaSchedulerName,
		withLabels(jobLabels, "trainer.kubeflow.org/trainjob-ancestor-step", "trainer", schedv1alpha1.PodGroupLabel, name),
		nil, 8, corev1.RestartPolicyNever,
		container("node", "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", []string{"torchrun", "/workspace/train.py"}, requests("2", "8Gi", 1)))
	r.apply(&batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-node-0", Labels: jobLabels,
			OwnerReferences: []metav1.OwnerReference{ref(js, "jobset.x-k8s.io/v1alpha2", "JobSet", true)}},
		Spec: batchv1.JobSpec{Parallelism: ptr.To(int32(4)), Completions: ptr.To(int32(4)), CompletionMode: ptr.To(batchv1.IndexedCompletion),
			BackoffLimit: ptr.To(int32(0)), Template: corev1.PodTemplateSpec{ObjectMeta: template.ObjectMeta, Spec: template.Spec}},
	})
	return func() {
		r.waitBoundTogether(ns, schedv1alpha1.PodGroupLabel+"="+name, 4, "trainer")
		r.waitQueueRanGang("trainer")
		require.NoError(r.t, r.h.WaitForJob(r.h.Ctx, ns, name+"-node-0", 90*time.Second), r.s.tl.String())
		r.waitPodGroupPhase(ns, name, schedv1alpha1.PodGroupFinished)
	}
}

// ray replays a RayCluster labelled ray.io/gang-scheduling-enabled with a
// head and a worker group of 2 GPU workers; the user deletes it when done.
func (r *replay) ray() func() {
	const ns, name = "ray-team", "raycluster-gang"
	rc := r.owner("ray.io/v1", "RayCluster", ns, name, map[string]string{"ray.io/gang-scheduling-enabled": "true"})
	// KubeRay's PodGroup names its RayCluster as owner, not as controller.
	r.apply(&schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{ref(rc, "ray.io/v1", "RayCluster", false)}},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: 3, MinResources: resourceList("5", "18Gi", 2)},
	})
	common := map[string]string{
		"ray.io/cluster": name, "ray.io/is-ray-node": "yes", "app.kubernetes.io/name": "kuberay",
		"app.kubernetes.io/created-by": "kuberay-operator", schedv1alpha1.PodGroupLabel: name,
	}
	owners := []metav1.OwnerReference{ref(rc, "ray.io/v1", "RayCluster", true)}
	r.apply(pod(ns, name+"-head-x7k2p", kubeRaySchedulerName,
		withLabels(common, "ray.io/node-type", "head", "ray.io/group", "headgroup", "ray.io/identifier", name+"-head"),
		owners, 0, corev1.RestartPolicyAlways,
		container("ray-head", "rayproject/ray:2.46.0", []string{"/bin/bash", "-lc", "ray start --head --block"}, requests("1", "2Gi", 0))))
	for _, suffix := range []string{"b4kqz", "m9wtd"} {
		r.apply(pod(ns, name+"-gpu-group-worker-"+suffix, kubeRaySchedulerName,
			withLabels(common, "ray.io/node-type", "worker", "ray.io/group", "gpu-group", "ray.io/identifier", name+"-worker"),
			owners, 0, corev1.RestartPolicyAlways,
			container("ray-worker", "rayproject/ray:2.46.0-gpu", []string{"/bin/bash", "-lc", "ray start --block"}, requests("2", "8Gi", 1))))
	}
	return func() {
		r.waitBoundTogether(ns, schedv1alpha1.PodGroupLabel+"="+name, 3, "ray")
		r.waitQueueRanGang("ray")
		gvr := schema.GroupVersionResource{Group: "ray.io", Version: "v1", Resource: "rayclusters"}
		require.NoError(r.t, r.h.Dynamic.Resource(gvr).Namespace(ns).Delete(r.h.Ctx, name, metav1.DeleteOptions{}))
		r.waitGone(ns, "ray.io/cluster="+name, "ray cluster deleted")
		r.waitDeleted(func() error {
			_, err := r.h.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(r.h.Ctx, name, metav1.GetOptions{})
			return err
		}, "the RayCluster's PodGroup")
	}
}

// sparkApp is a SparkApplication replayed: its driver waits to be played.
type sparkApp struct {
	app    *unstructured.Unstructured
	driver *corev1.Pod
}

// spark replays a SparkApplication of a driver and 2 executors (1 cpu,
// 1g each, plus Spark's 384m memory overhead).
func (r *replay) spark() *sparkApp {
	const ns, name = "spark-team", "pi"
	app := r.owner("sparkoperator.k8s.io/v1beta2", "SparkApplication", ns, name, nil)
	r.apply(&schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-pg", OwnerReferences: []metav1.OwnerReference{ref(app, "sparkoperator.k8s.io/v1beta2", "SparkApplication", true)}},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: 1, MinResources: resourceList("3", "4224Mi", 0)},
	})
	driver := pod(ns, name+"-driver", cluster.FlotillaSchedulerName, sparkLabels(name, "driver"),
		[]metav1.OwnerReference{ref(app, "sparkoperator.k8s.io/v1beta2", "SparkApplication", true)}, 20, corev1.RestartPolicyNever,
		container("spark-kubernetes-driver", "spark:3.5.5", []string{"/opt/entrypoint.sh", "driver"}, requests("1", "1408Mi", 0)))
	r.apply(driver)
	return &sparkApp{app: app, driver: driver}
}

func sparkLabels(app, role string) map[string]string {
	return map[string]string{
		"spark-app-name": app, "spark-app-selector": "spark-5f2c7a9e0b3d4e1f8a6b9c0d1e2f3a4b", "spark-role": role,
		"spark-version": "3.5.5", "sparkoperator.k8s.io/app-name": app, "sparkoperator.k8s.io/launched-by-spark-operator": "true",
		"sparkoperator.k8s.io/submission-id": "1b6f0c2e-8d3a-4f5b-9e7c-2a1d0f3b4c5e", schedv1alpha1.PodGroupLabel: app + "-pg",
	}
}

// playSpark plays the driver: once it runs it asks for its 2 executors,
// which run and end before it does.
func (r *replay) playSpark(app *sparkApp) {
	const ns = "spark-team"
	driver := r.waitBoundTogether(ns, "spark-role=driver", 1, "spark driver")[0]
	r.waitQueueRanGang("spark")
	require.Eventually(r.t, func() bool {
		p, err := r.h.Client.CoreV1().Pods(ns).Get(r.h.Ctx, driver.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	}, 30*time.Second, 250*time.Millisecond, "the spark driver runs\n%s", r.s.tl)
	for i := 1; i <= 2; i++ {
		r.apply(pod(ns, fmt.Sprintf("pi-8c3b5a8f9e0d1c2b-exec-%d", i), cluster.FlotillaSchedulerName,
			withLabels(sparkLabels("pi", "executor"), "spark-exec-id", fmt.Sprint(i), "spark-exec-resourceprofile-id", "0"),
			[]metav1.OwnerReference{ref(&driver, "v1", "Pod", true)}, 5, corev1.RestartPolicyNever,
			container("spark-kubernetes-executor", "spark:3.5.5", []string{"/opt/entrypoint.sh", "executor"}, requests("1", "1408Mi", 0))))
	}
	// Surplus members of a gang that has its quorum (the driver): placed
	// one by one.
	r.waitBound(ns, "spark-role=executor", 2, "spark executors", false)
	require.Eventually(r.t, func() bool {
		p, err := r.h.Client.CoreV1().Pods(ns).Get(r.h.Ctx, driver.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded
	}, 60*time.Second, 250*time.Millisecond, "the spark driver completes\n%s", r.s.tl)
	r.waitPodGroupPhase(ns, "pi-pg", schedv1alpha1.PodGroupFinished)
}

// mpi replays an MPIJob of a launcher and 3 workers: the workers run sshd
// until the launcher's mpirun ends, then the operator deletes them (as
// with cleanPodPolicy Running).
func (r *replay) mpi() func() {
	const ns, name = "mpi-team", "pi"
	job := r.owner("kubeflow.org/v2beta1", "MPIJob", ns, name, nil)
	owners := []metav1.OwnerReference{ref(job, "kubeflow.org/v2beta1", "MPIJob", true)}
	r.apply(&schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: 4, ScheduleTimeoutSeconds: ptr.To(int32(0)), MinResources: resourceList("7", "13Gi", 0)},
	})
	common := map[string]string{"training.kubeflow.org/job-name": name, "training.kubeflow.org/operator-name": "mpi-operator", schedv1alpha1.PodGroupLabel: name}
	for i := 0; i < 3; i++ {
		w := pod(ns, fmt.Sprintf("%s-worker-%d", name, i), cluster.FlotillaSchedulerName,
			withLabels(common, "training.kubeflow.org/job-role", "worker", "training.kubeflow.org/replica-index", fmt.Sprint(i)),
			owners, 0, corev1.RestartPolicyNever,
			container("worker", "mpioperator/mpi-pi:openmpi", []string{"/usr/sbin/sshd", "-De"}, requests("2", "4Gi", 0)))
		w.Spec.Hostname, w.Spec.Subdomain = w.Name, name
		r.apply(w)
	}
	launcher := pod(ns, "", cluster.FlotillaSchedulerName, withLabels(common, "training.kubeflow.org/job-role", "launcher"),
		nil, 10, corev1.RestartPolicyOnFailure,
		container("launcher", "mpioperator/mpi-pi:openmpi", []string{"mpirun", "-n", "3", "/home/mpiuser/pi"}, requests("1", "1Gi", 0)))
	r.apply(&batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-launcher", Labels: common, OwnerReferences: owners},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To(int32(6)),
			Template: corev1.PodTemplateSpec{ObjectMeta: launcher.ObjectMeta, Spec: launcher.Spec}},
	})
	return func() {
		r.waitBoundTogether(ns, schedv1alpha1.PodGroupLabel+"="+name, 4, "mpi")
		r.waitQueueRanGang("mpi")
		require.NoError(r.t, r.h.WaitForJob(r.h.Ctx, ns, name+"-launcher", 90*time.Second), r.s.tl.String())
		require.NoError(r.t, r.h.Client.CoreV1().Pods(ns).DeleteCollection(r.h.Ctx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: "training.kubeflow.org/job-role=worker"}))
		r.waitGone(ns, "training.kubeflow.org/job-role=worker", "mpi workers cleaned up")
		// The launcher succeeded and nothing else runs or waits: the gang
		// is over, though fewer than minMember pods succeeded.
		r.waitPodGroupPhase(ns, name, schedv1alpha1.PodGroupFinished)
	}
}

// waitPodGroupPhase waits until the PodGroup's status has the phase.
func (r *replay) waitPodGroupPhase(namespace, name string, phase schedv1alpha1.PodGroupPhase) {
	r.t.Helper()
	var last schedv1alpha1.PodGroupPhase
	require.Eventually(r.t, func() bool {
		pg, err := r.h.PodGroups.SchedulingV1alpha1().PodGroups(namespace).Get(r.h.Ctx, name, metav1.GetOptions{})
		if err == nil {
			last = pg.Status.Phase
		}
		return last == phase
	}, 30*time.Second, 250*time.Millisecond, "PodGroup %s/%s reaches %s (it is %q)\n%s", namespace, name, phase, last, r.s.tl)
}
