package cluster

import (
	"context"
	"fmt"
	"strconv"
	"time"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// WorkloadSpec is the pod template of a Job or Deployment, built the way
// users write them: every container requests cpu and memory (GPU pods
// also nvidia.com/gpu), limits equal requests.
type WorkloadSpec struct {
	Namespace, Name string
	// Replicas: a Deployment's replicas, a Job's parallelism and
	// completions.
	Replicas int32
	CPU      string // e.g. "1"
	Memory   string // e.g. "1Gi"; required with CPU
	GPU      string // optional GPU request, of GPUResource
	// GPUResource is the extended resource GPU asks for: nvidia.com/gpu
	// (a device plugin's allocatable) unless set, e.g. to the
	// extendedResourceName of a DeviceClass (DRA-backed).
	GPUResource corev1.ResourceName
	// ClaimTemplate, when set, gives each pod a ResourceClaim generated
	// from that ResourceClaimTemplate (DRA devices), used by its container.
	ClaimTemplate string
	// Queue labels the pods with their flotilla queue ("" for the default).
	Queue string
	// PodGroup labels the pods as members of that scheduler-plugins
	// PodGroup (created separately, as Kubeflow and Spark operators do).
	PodGroup string
	// RunSeconds: how long each pod runs before it succeeds (Jobs). Zero:
	// it runs until deleted.
	RunSeconds float64
	// GracePeriodSeconds is the pods' terminationGracePeriodSeconds. The
	// default, 1, keeps evictions quick in tests; the simulated kubelet
	// honours whatever is set.
	GracePeriodSeconds *int64
	PriorityClassName  string
	// SchedulerName defaults to flotilla-scheduler.
	SchedulerName string
	// Indexed makes a Job's completion mode Indexed.
	Indexed bool
	// BackoffLimit of a Job (nil: Kubernetes' default, 6).
	BackoffLimit *int32
	// RunBoundSeconds is the pods' activeDeadlineSeconds: the kubelet
	// fails a pod that long after it started, so its run is bounded (what
	// a gang's reservation backfills by). Nil: none.
	RunBoundSeconds *int64
	// IgnoreDisruptions gives a Job the pod failure policy batch users of
	// preemptible capacity write: a pod evicted or preempted (condition
	// DisruptionTarget) does not count against backoffLimit. Its
	// replacement then waits until the pod is gone (podReplacementPolicy
	// Failed).
	IgnoreDisruptions bool
}

func (s WorkloadSpec) template(ownerLabel string) corev1.PodTemplateSpec {
	requests := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(s.CPU),
		corev1.ResourceMemory: resource.MustParse(s.Memory),
	}
	if s.GPU != "" {
		name := s.GPUResource
		if name == "" {
			name = GPU
		}
		requests[name] = resource.MustParse(s.GPU)
	}
	labels := map[string]string{"app": ownerLabel}
	if s.Queue != "" {
		labels[flotillav1alpha1.QueueLabel] = s.Queue
	}
	if s.PodGroup != "" {
		labels[schedv1alpha1.PodGroupLabel] = s.PodGroup
	}
	annotations := map[string]string{}
	if s.RunSeconds > 0 {
		annotations[RunSecondsAnnotation] = strconv.FormatFloat(s.RunSeconds, 'f', -1, 64)
	}
	scheduler := s.SchedulerName
	if scheduler == "" {
		scheduler = FlotillaSchedulerName
	}
	grace := s.GracePeriodSeconds
	if grace == nil {
		one := int64(1)
		grace = &one
	}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			SchedulerName:                 scheduler,
			PriorityClassName:             s.PriorityClassName,
			TerminationGracePeriodSeconds: grace,
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests.DeepCopy()},
			}},
		},
	}
	tmpl.Spec.ActiveDeadlineSeconds = s.RunBoundSeconds
	if s.ClaimTemplate != "" {
		tmpl.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "devices", ResourceClaimTemplateName: &s.ClaimTemplate}}
		tmpl.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "devices"}}
	}
	return tmpl
}

func (s WorkloadSpec) namespace() string {
	if s.Namespace == "" {
		return metav1.NamespaceDefault
	}
	return s.Namespace
}

// Job builds a batch/v1 Job whose pods run RunSeconds and succeed.
func Job(s WorkloadSpec) *batchv1.Job {
	if s.CPU == "" || s.Memory == "" {
		panic(fmt.Sprintf("job %s: pods request cpu and memory", s.Name))
	}
	tmpl := s.template(s.Name)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace(), Name: s.Name, Labels: tmpl.Labels},
		Spec: batchv1.JobSpec{
			Parallelism: &s.Replicas, Completions: &s.Replicas,
			BackoffLimit: s.BackoffLimit,
			Template:     tmpl,
		},
	}
	if s.IgnoreDisruptions {
		job.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
			Action:          batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
		}}}
	}
	if s.Indexed {
		mode := batchv1.IndexedCompletion
		job.Spec.CompletionMode = &mode
	}
	return job
}

// Deployment builds an apps/v1 Deployment of pods that run until deleted.
func Deployment(s WorkloadSpec) *appsv1.Deployment {
	if s.CPU == "" || s.Memory == "" {
		panic(fmt.Sprintf("deployment %s: pods request cpu and memory", s.Name))
	}
	tmpl := s.template(s.Name)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace(), Name: s.Name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &s.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": s.Name}},
			Template: tmpl,
		},
	}
}

// CreateJob creates the Job.
func (cp *ControlPlane) CreateJob(ctx context.Context, s WorkloadSpec) (*batchv1.Job, error) {
	return cp.Client.BatchV1().Jobs(s.namespace()).Create(ctx, Job(s), metav1.CreateOptions{})
}

// CreateDeployment creates the Deployment.
func (cp *ControlPlane) CreateDeployment(ctx context.Context, s WorkloadSpec) (*appsv1.Deployment, error) {
	return cp.Client.AppsV1().Deployments(s.namespace()).Create(ctx, Deployment(s), metav1.CreateOptions{})
}

// JobFinished returns whether the Job completed or failed, and which.
func JobFinished(job *batchv1.Job) (finished bool, condition batchv1.JobConditionType) {
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, c.Type
		}
	}
	return false, ""
}

// WaitForJob waits until the Job completes; a Job that fails or does not
// complete in time is an error that says how far it got.
func (cp *ControlPlane) WaitForJob(ctx context.Context, namespace, name string, timeout time.Duration) error {
	var last *batchv1.Job
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		job, err := cp.Client.BatchV1().Jobs(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = job
		done, how := JobFinished(job)
		if done && how == batchv1.JobFailed {
			return false, fmt.Errorf("job %s/%s failed", namespace, name)
		}
		return done, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (active %d, succeeded %d, failed %d)", err, last.Status.Active, last.Status.Succeeded, last.Status.Failed)
	}
	return err
}
