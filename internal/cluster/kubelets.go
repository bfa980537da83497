package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/kubernetes/test/utils/ktesting"
	"k8s.io/utils/clock"
	"sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodelease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	kwokclient "sigs.k8s.io/kwok/pkg/client/clientset/versioned"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/controllers"
	kwoklog "sigs.k8s.io/kwok/pkg/log"
	utilsclient "sigs.k8s.io/kwok/pkg/utils/client"
)

// The kubelet simulator is KWOK (sigs.k8s.io/kwok), run in this process:
// it heartbeats the nodes (a Lease each), runs bound pods (Pending →
// Running and Ready) and plays them to the end their annotations give, and
// finishes deleted pods when their grace period ends.
const (
	// ManagedNodeLabel marks the nodes KWOK plays the kubelet of. Taking
	// it off a node is the kubelet dying: its heartbeats stop, the node
	// lifecycle controller marks it unreachable and evicts its pods, and
	// nothing finishes them (see StopKubelet).
	ManagedNodeLabel = "kwok.x-k8s.io/node"
	managedNodeValue = "fake"

	// RunSecondsAnnotation on a pod: it runs this many seconds (a decimal
	// number) once Running, then ends. Without it a pod runs until deleted,
	// as a service's pods do.
	RunSecondsAnnotation = "sim.flotilla.dev/run-seconds"
	// ExitCodeAnnotation on a pod: it ends with this non-zero exit code,
	// in phase Failed; without it the pod Succeeds with exit code 0.
	ExitCodeAnnotation = "sim.flotilla.dev/exit-code"
)

// nodeLeaseSeconds: each node's Lease lasts this long and is renewed every
// quarter of it, well inside the node lifecycle controller's grace.
const nodeLeaseSeconds = 8

// podStages play a pod's life: ready, then succeed or fail after its run
// time, and deletion honouring the grace period (delay until the
// deletionTimestamp, which is the deletion time plus the grace period).
// containerStatuses[].state.terminated carries finishedAt and the exit
// code: the Job controller's failure back-off and pod failure policies
// read them.
var podStages = []string{podfast.DefaultPodReady,
	endStage("sim-pod-succeed", "DoesNotExist", "0", "Completed", "PodCompleted", "Succeeded"),
	endStage("sim-pod-fail", "Exists", `{{ index .metadata.annotations "`+ExitCodeAnnotation+`" }}`, "Error", "PodFailed", "Failed"),
	// A deleted pod that still runs is stopped when its grace period ends
	// and, as a kubelet does, reported terminal (Failed, exit code 137)
	// before it goes: the Job controller waits for that before it drops
	// its tracking finalizer when a pod failure policy is set. The status
	// patch leaves the pod's conditions alone (DisruptionTarget is what
	// such a policy matches).
	`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: sim-pod-stop}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: Exists}
    - {key: '.status.phase', operator: NotIn, values: [Succeeded, Failed]}
  delay:
    durationFrom: {jq: {expression: '.metadata.deletionTimestamp'}}
  next:
    statusTemplate: |
      {{ $now := Now }}
` + terminatedContainers("137", "Error") + `
      phase: Failed
`, `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: sim-pod-delete}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: Exists}
    - {key: '.status.phase', operator: In, values: [Succeeded, Failed]}
  next:
    delete: true
`}

// endStage ends a running pod that has a run time, once it has run that
// long: with ExitCodeAnnotation absent (exitCodeOperator DoesNotExist) it
// Succeeds, present (Exists) it Fails with that code.
func endStage(name, exitCodeOperator, exitCode, reason, conditionReason, phase string) string {
	return `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: ` + name + `}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: DoesNotExist}
    - {key: '.status.phase', operator: In, values: [Running]}
    - {key: '.metadata.annotations["` + RunSecondsAnnotation + `"]', operator: Exists}
    - {key: '.metadata.annotations["` + ExitCodeAnnotation + `"]', operator: ` + exitCodeOperator + `}
  delay:
    durationFrom: {jq: {expression: '.metadata.annotations["` + RunSecondsAnnotation + `"] + "s"'}}
  next:
    statusTemplate: |
      {{ $now := Now }}
      conditions:
      - {lastTransitionTime: {{ $now | Quote }}, status: "False", type: Ready, reason: ` + conditionReason + `}
      - {lastTransitionTime: {{ $now | Quote }}, status: "False", type: ContainersReady, reason: ` + conditionReason + `}
` + terminatedContainers(exitCode, reason) + `
      phase: ` + phase + `
`
}

// terminatedContainers is the statusTemplate lines that report every
// container exited with the code, finishedAt now ($now).
func terminatedContainers(exitCode, reason string) string {
	return `      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated: {exitCode: ` + exitCode + `, reason: ` + reason + `, finishedAt: {{ $now | Quote }}}
      {{ end }}`
}

var nodeStages = []string{fast.DefaultNodeInit, nodelease.DefaultNodeHeartbeatWithLease}

func parseStages() (map[internalversion.StageResourceRef][]*internalversion.Stage, error) {
	out := map[internalversion.StageResourceRef][]*internalversion.Stage{}
	for _, raw := range append(append([]string{}, podStages...), nodeStages...) {
		stage, err := config.UnmarshalWithType[*internalversion.Stage](raw)
		if err != nil {
			return nil, fmt.Errorf("parsing a kubelet simulator stage: %w", err)
		}
		out[stage.Spec.ResourceRef] = append(out[stage.Spec.ResourceRef], stage)
	}
	return out, nil
}

// harmlessFilter drops KWOK's reports of two harmless failures, which only
// hide the real ones in a red run's output:
//   - when a pod changes while KWOK's patch making it Ready is in flight,
//     KWOK plays the stage again from its stale copy with a newly
//     allocated pod IP, and the apiserver refuses the second IP (the
//     first patch stands);
//   - a pod evicted (by preemption or reclaim) is deleted by the eviction
//     while KWOK's stage deleting its terminating pod is in flight: the
//     pod is "not found", gone as the stage wanted.
type harmlessFilter struct{ w io.Writer }

func (f harmlessFilter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"stage":"pod-ready"`)) && bytes.Contains(p, []byte("may specify no more than one IP for each IP family")) {
		return len(p), nil
	}
	if bytes.Contains(p, []byte(`"stage":"sim-pod-delete"`)) && bytes.Contains(p, []byte("not found")) {
		return len(p), nil
	}
	return f.w.Write(p)
}

// startKubelets runs KWOK's controllers over the nodes labelled
// ManagedNodeLabel until ctx ends.
func startKubelets(ctx context.Context, kubeconfigPath string, opts KubeletOptions) error {
	// KWOK logs every lease renewal at info; keep its warnings and errors.
	logs := opts.Log
	if logs == nil {
		logs = os.Stderr
	}
	ctx = kwoklog.NewContext(ctx, kwoklog.NewLogger(harmlessFilter{logs}, kwoklog.LevelWarn))
	stages, err := parseStages()
	if err != nil {
		return err
	}
	clientset, err := utilsclient.NewClientset("", kubeconfigPath)
	if err != nil {
		return err
	}
	restConfig, err := clientset.ToRESTConfig()
	if err != nil {
		return err
	}
	restConfig = unthrottled(restConfig)
	dynamicClient, err := clientset.ToDynamicClient()
	if err != nil {
		return err
	}
	restMapper, err := clientset.ToRESTMapper()
	if err != nil {
		return err
	}
	restClient, err := rest.RESTClientFor(restConfig)
	if err != nil {
		return err
	}
	typedClient, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	typedKwokClient, err := kwokclient.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	var leaseSeconds uint = nodeLeaseSeconds
	if opts.NoHeartbeats {
		leaseSeconds = 0 // KWOK then keeps no Leases
	}
	id, err := controllers.Identity()
	if err != nil {
		return err
	}
	ctr, err := controllers.NewController(controllers.Config{
		Clock:                        clock.RealClock{},
		DynamicClient:                dynamicClient,
		RESTClient:                   restClient,
		RESTMapper:                   restMapper,
		ImpersonatingDynamicClient:   clientset.ToImpersonatingDynamicClient(),
		ImpersonatingTypedClient:     clientset.ToImpersonatingTypedClient(),
		TypedClient:                  typedClient,
		TypedKwokClient:              typedKwokClient,
		ManageNodesWithLabelSelector: ManagedNodeLabel + "=" + managedNodeValue,
		CIDR:                         "10.0.0.0/16",
		NodeIP:                       "10.255.0.1",
		LocalStages:                  stages,
		PodPlayStageParallelism:      8,
		NodePlayStageParallelism:     4,
		NodeLeaseParallelism:         4,
		NodeLeaseDurationSeconds:     leaseSeconds,
		PodsOnNodeSyncParallelism:    2,
		ID:                           id,
	})
	if err != nil {
		return fmt.Errorf("kubelet simulator: %w", err)
	}
	return ctr.Start(ctx)
}

// KubeletOptions tune the kubelet simulator.
type KubeletOptions struct {
	// NoHeartbeats: nodes renew no Lease. A node then stays as it was
	// made (Ready) for as long as no node lifecycle controller runs; the
	// benchmarks use it on 1000 nodes, whose renewals (one write per node
	// every 2 s) would take a share of this machine's apiserver that no
	// real cluster's scheduler competes with.
	NoHeartbeats bool
	// Log is where the simulator's warnings and errors go (nil: stderr).
	Log io.Writer
}

// StartKubelets runs the kubelet simulator (see kubelets.go) over every
// node made with CreateNodes until tb's clean-up.
func (cp *ControlPlane) StartKubelets(ctx context.Context, tb ktesting.TB, opts KubeletOptions) error {
	kubeletCtx, stop := context.WithCancel(ctx)
	tb.Cleanup(func() {
		stop()
		// Its watches end with the context; give them a moment before the
		// apiserver goes, which otherwise waits for them.
		time.Sleep(100 * time.Millisecond)
	})
	return startKubelets(kubeletCtx, cp.KubeconfigPath, opts)
}

// FinishTerminatingPods plays the kubelets' part in deletion until ctx
// ends, for a cluster started without the kubelet simulator
// (StartKubelets): a bound pod deleted with a grace period stays
// terminating until its kubelet reports its containers stopped, and
// without kubelets every terminating pod is removed at once.
func (cp *ControlPlane) FinishTerminatingPods(ctx context.Context) error {
	return FinishTerminatingPods(ctx, cp.tb, cp.Client)
}

// FinishTerminatingPods does the same against any cluster the client
// reaches.
func FinishTerminatingPods(ctx context.Context, tb ktesting.TB, client kubernetes.Interface) error {
	// Stopped before the apiserver, which otherwise waits a minute for the
	// watch to drain.
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	tb.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	finish := func(obj interface{}) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp == nil {
			return
		}
		err := client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(pod.UID)),
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			tb.Logf("finishing terminating pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
	}
	_, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    finish,
		UpdateFunc: func(_, obj interface{}) { finish(obj) },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return nil
}

// EndPod plays a kubelet reporting that the pod's container exited: with
// exit code 0 it Succeeded, else Failed. It injects failures (and early
// finishes) into running workloads at a time the test chooses.
func (cp *ControlPlane) EndPod(ctx context.Context, namespace, name string, exitCode int32) error {
	return cp.updatePodStatus(ctx, namespace, name, func(pod *corev1.Pod) error {
		now := metav1.Now()
		phase, reason := corev1.PodSucceeded, "Completed"
		if exitCode != 0 {
			phase, reason = corev1.PodFailed, "Error"
		}
		pod.Status.Phase = phase
		var statuses []corev1.ContainerStatus
		for _, c := range pod.Spec.Containers {
			statuses = append(statuses, corev1.ContainerStatus{
				Name: c.Name, Image: c.Image,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: reason, FinishedAt: now}},
			})
		}
		pod.Status.ContainerStatuses = statuses
		for i := range pod.Status.Conditions {
			if t := pod.Status.Conditions[i].Type; t == corev1.PodReady || t == corev1.ContainersReady {
				pod.Status.Conditions[i].Status, pod.Status.Conditions[i].LastTransitionTime = corev1.ConditionFalse, now
			}
		}
		return nil
	})
}

// updatePodStatus writes the status change onto the pod's latest version,
// again on a conflict: the simulated kubelets write the same pods' status
// (Running, Ready) at moments the test does not choose, often just after
// it read the pod.
func (cp *ControlPlane) updatePodStatus(ctx context.Context, namespace, name string, change func(*corev1.Pod) error) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := cp.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := change(pod); err != nil {
			return err
		}
		_, err = cp.Client.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

// StopKubelet plays a node's kubelet dying: the simulator lets go of the
// node, its Lease is no longer renewed, the node lifecycle controller
// marks it unreachable and taint eviction deletes its pods, which stay
// Terminating (nobody is left to confirm they stopped) until the node is
// deleted or tainted out-of-service.
func (cp *ControlPlane) StopKubelet(ctx context.Context, node string) error {
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, ManagedNodeLabel))
	_, err := cp.Client.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", patch, metav1.PatchOptions{})
	return err
}

// SetPodPhase plays the kubelet for a bound pod: it moves the pod to Running
// (Ready) or to a terminal phase, so status logic can be tested.
func (cp *ControlPlane) SetPodPhase(ctx context.Context, namespace, name string, phase corev1.PodPhase) error {
	return cp.updatePodStatus(ctx, namespace, name, func(pod *corev1.Pod) error {
		if pod.Spec.NodeName == "" {
			return fmt.Errorf("pod %s/%s is not bound; a kubelet would not run it", namespace, name)
		}
		now := metav1.Now()
		pod.Status.Phase = phase
		ready := corev1.ConditionFalse
		if phase == corev1.PodRunning {
			ready = corev1.ConditionTrue
			pod.Status.StartTime = &now
		}
		setCondition(pod, corev1.PodCondition{Type: corev1.PodReady, Status: ready, LastTransitionTime: now})
		setCondition(pod, corev1.PodCondition{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: now})
		return nil
	})
}

func setCondition(pod *corev1.Pod, cond corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == cond.Type {
			pod.Status.Conditions[i] = cond
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, cond)
}
