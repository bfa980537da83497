package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
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

// duplicateReadyFilter drops KWOK's report of one harmless failure: when a
// pod changes while KWOK's patch making it Ready is in flight, KWOK plays
// the stage again from its stale copy with a newly allocated pod IP, and
// the apiserver refuses the second IP. The first patch stands; the error
// only hides the real ones in a red run's output.
type duplicateReadyFilter struct{ w io.Writer }

func (f duplicateReadyFilter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"stage":"pod-ready"`)) && bytes.Contains(p, []byte("may specify no more than one IP for each IP family")) {
		return len(p), nil
	}
	return f.w.Write(p)
}

// startKubelets runs KWOK's controllers over the nodes labelled
// ManagedNodeLabel until ctx ends.
func startKubelets(ctx context.Context, kubeconfigPath string, opts KubeletOptions) error {
	// KWOK logs every lease renewal at info; keep its warnings and errors.
	ctx = kwoklog.NewContext(ctx, kwoklog.NewLogger(duplicateReadyFilter{os.Stderr}, kwoklog.LevelWarn))
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
