package flotillactl

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	podgroupfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

// A native group's pending members are one gang entry, in the queue its
// Workload names, with its minCount; its reason is flotilla's word on the
// PodGroup when the members carry kube-scheduler's ("minCount cannot be
// satisfied"), the member's own when that gives one. A basic group's pod
// is an entry of its own; a member of a group that does not exist waits
// for it.
func TestPendingNativeGroups(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	member := func(name, group, message string) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(t0)},
			Spec:   corev1.PodSpec{SchedulerName: "flotilla-scheduler", SchedulingGroup: &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}},
			Status: corev1.PodStatus{Phase: corev1.PodPending}}
		if message != "" {
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: message}}
		}
		return pod
	}
	gang := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "serve", CreationTimestamp: metav1.NewTime(t0.Add(-time.Minute))},
		Spec: schedulingv1beta1.PodGroupSpec{WorkloadRef: &schedulingv1beta1.WorkloadReference{WorkloadName: "serve", TemplateName: "t"},
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 3}}}}
	basic := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "loose"},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}}}
	workload := &schedulingv1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "serve", Labels: map[string]string{flotillav1alpha1.QueueLabel: "production"}}}
	told := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "serve.1"}, LastTimestamp: metav1.NewTime(t0),
		InvolvedObject: corev1.ObjectReference{Kind: "PodGroup", APIVersion: "scheduling.k8s.io/v1beta1", Namespace: "ns", Name: "serve"},
		Reason:         "QueueCapability", Message: `QueueCapability: queue "production": gang ns/serve (scheduling.k8s.io) (3 members for its quorum) would exceed its capability of cpu (14 > 12)`}
	kube := fake.NewClientset(gang, basic, workload, told,
		member("serve-0", "serve", "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"),
		member("serve-1", "serve", "minCount (3) cannot be satisfied: 0 scheduled, 2 remaining"),
		member("loose-0", "loose", ""),
		member("orphan-0", "missing", ""))
	c := &clients{kube: kube, podGroups: podgroupfake.NewSimpleClientset(), namespace: "ns"}

	entries, err := pendingEntries(context.Background(), c, []string{"flotilla-scheduler"}, "default")
	require.NoError(t, err)
	byName := map[string]PendingEntry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	serve := byName["ns/serve (scheduling.k8s.io)"]
	assert.Equal(t, "gang", serve.Kind)
	assert.Equal(t, "production", serve.Queue, "the Workload's queue label")
	assert.Equal(t, int32(3), serve.MinMember)
	assert.Equal(t, 2, serve.Pending)
	assert.Equal(t, []string{"QueueCapability"}, serve.Reasons, serve.Message)

	loose := byName["ns/loose-0"]
	assert.Equal(t, "pod", loose.Kind, "a basic group is no gang")
	assert.Equal(t, "default", loose.Queue)

	orphan := byName["ns/missing (scheduling.k8s.io)"]
	assert.Equal(t, []string{"WaitingForPodGroup"}, orphan.Reasons, orphan.Message)
	assert.Equal(t, "podgroups.scheduling.k8s.io/serve", objectName(serve.Kind, serve.Name))
}
