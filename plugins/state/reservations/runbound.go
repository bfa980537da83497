package reservations

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// JobOf returns the Job that owns the pod, if it is in jobs (a lookup by
// namespace and name: the Job controller's pods name it as controller).
func JobOf(pod *corev1.Pod, job func(namespace, name string) *batchv1.Job) *batchv1.Job {
	if job == nil {
		return nil
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "Job" || owner.APIVersion != batchv1.SchemeGroupVersion.String() {
		return nil
	}
	j := job(pod.Namespace, owner.Name)
	if j == nil || j.UID != owner.UID {
		return nil
	}
	return j
}

// EndsBy is when the pod is sure to have ended, zero when nothing bounds
// its run: the earlier of its own activeDeadlineSeconds from its start
// (the kubelet fails it then) and its Job's from the Job's start (the Job
// controller fails the Job and deletes its pods then). A pod not started
// yet starts at now at the earliest, and so does a Job not started yet.
func EndsBy(pod *corev1.Pod, job *batchv1.Job, now time.Time) time.Time {
	var bound time.Time
	earlier := func(t time.Time) {
		if bound.IsZero() || t.Before(bound) {
			bound = t
		}
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil && *d > 0 {
		start := now
		if pod.Status.StartTime != nil {
			start = pod.Status.StartTime.Time
		}
		earlier(start.Add(time.Duration(*d) * time.Second))
	}
	if job != nil && job.Spec.ActiveDeadlineSeconds != nil && *job.Spec.ActiveDeadlineSeconds > 0 {
		start := now
		if job.Status.StartTime != nil {
			start = job.Status.StartTime.Time
		}
		earlier(start.Add(time.Duration(*job.Spec.ActiveDeadlineSeconds) * time.Second))
	}
	return bound
}
