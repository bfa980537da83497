package reservations

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// A pod's run bound is the earlier of its own activeDeadlineSeconds from
// its start and its Job's from the Job's start; a pod or Job not started
// yet starts now at the earliest; without either, none.
func TestEndsBy(t *testing.T) {
	started := func(p *corev1.Pod, at time.Time) *corev1.Pod {
		p.Status.StartTime = ptr.To(metav1.NewTime(at))
		return p
	}
	withDeadline := func(p *corev1.Pod, s int64) *corev1.Pod {
		p.Spec.ActiveDeadlineSeconds = ptr.To(s)
		return p
	}
	job := func(deadline int64, startedAt *time.Time) *batchv1.Job {
		j := &batchv1.Job{}
		j.Spec.ActiveDeadlineSeconds = ptr.To(deadline)
		if startedAt != nil {
			j.Status.StartTime = ptr.To(metav1.NewTime(*startedAt))
		}
		return j
	}
	earlier := t0.Add(-time.Minute)
	tests := []struct {
		name string
		pod  *corev1.Pod
		job  *batchv1.Job
		want time.Time
	}{
		{"no bound", small("p", 0), nil, time.Time{}},
		{"its own, not started: from now", withDeadline(small("p", 0), 30), nil, t0.Add(30 * time.Second)},
		{"its own, from its start", withDeadline(started(small("p", 0), earlier), 30), nil, earlier.Add(30 * time.Second)},
		{"its Job's, from the Job's start", started(small("p", 0), t0), job(120, &earlier), earlier.Add(2 * time.Minute)},
		{"its Job's, the Job not started: from now", small("p", 0), job(120, nil), t0.Add(2 * time.Minute)},
		{"the earlier of both", withDeadline(small("p", 0), 300), job(120, &earlier), earlier.Add(2 * time.Minute)},
		{"a Job without a deadline bounds nothing", small("p", 0), &batchv1.Job{}, time.Time{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, EndsBy(tc.pod, tc.job, t0))
		})
	}
}

// A pod's Job is the Job its controller reference names, found by name
// and matched by UID: a Job made again under the same name is another's.
func TestJobOf(t *testing.T) {
	j := &batchv1.Job{}
	j.Namespace, j.Name, j.UID = "ns", "train", "job-uid"
	find := func(namespace, name string) *batchv1.Job {
		if namespace == "ns" && name == "train" {
			return j
		}
		return nil
	}
	owned := func(kind, apiVersion, name, uid string) *corev1.Pod {
		p := small("p", 0)
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}}
		return p
	}
	assert.Same(t, j, JobOf(owned("Job", "batch/v1", "train", "job-uid"), find))
	assert.Nil(t, JobOf(owned("Job", "batch/v1", "train", "old-uid"), find), "another Job of that name")
	assert.Nil(t, JobOf(owned("ReplicaSet", "apps/v1", "train", "job-uid"), find))
	assert.Nil(t, JobOf(owned("Job", "batch/v1", "gone", "job-uid"), find))
	assert.Nil(t, JobOf(small("p", 0), find), "no owner")
	assert.Nil(t, JobOf(owned("Job", "batch/v1", "train", "job-uid"), nil), "no Job informer")
}
