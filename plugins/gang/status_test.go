package gang

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

// A waiting gang's PodGroup says one reason and its message; a gang that
// does not wait says nothing.
func TestWaitingOf(t *testing.T) {
	pg := podGroup("g", t0, 2)
	member := func(name, node string, phase corev1.PodPhase, message string) corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Node(node).Phase(phase).Obj()
		if message != "" {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: message}}
		}
		return *p
	}
	doesNotFit := reasons.InsufficientResources.Say("gang ns/g does not fit: 1 of the 2 members needed")
	overShare := reasons.QueueOverShare.Say(`queue "a": cpu 4 > 2`)
	for _, tc := range []struct {
		name    string
		pods    []corev1.Pod
		phase   schedv1alpha1.PodGroupPhase
		placing bool
		retrier types.UID
		want    waiting
	}{
		{name: "members short", pods: []corev1.Pod{member("a", "", corev1.PodPending, "")}, phase: schedv1alpha1.PodGroupPending,
			want: waiting{reason: reasons.WaitingForMembers, message: "WaitingForMembers: gang ns/g has 1 of its minMember 2 pods; it is not scheduled until they exist"}},
		{name: "a failed member is not one of them", pods: []corev1.Pod{member("a", "", corev1.PodPending, ""), member("b", "n1", corev1.PodFailed, "")},
			phase: schedv1alpha1.PodGroupPending, want: waiting{reason: reasons.WaitingForMembers,
				message: "WaitingForMembers: gang ns/g has 1 of its minMember 2 pods; it is not scheduled until they exist"}},
		{name: "never tried: nothing to say", pods: []corev1.Pod{member("a", "", corev1.PodPending, ""), member("b", "", corev1.PodPending, "")},
			phase: schedv1alpha1.PodGroupPending},
		{name: "the retrier's message is the gang's",
			pods:  []corev1.Pod{member("a", "", corev1.PodPending, overShare), member("b", "", corev1.PodPending, overShare), member("c", "", corev1.PodPending, doesNotFit)},
			phase: schedv1alpha1.PodGroupPending, retrier: "c",
			want: waiting{reason: reasons.InsufficientResources, message: doesNotFit}},
		{name: "no retrier: what most members say",
			pods:  []corev1.Pod{member("a", "", corev1.PodPending, doesNotFit), member("b", "", corev1.PodPending, overShare), member("c", "", corev1.PodPending, overShare)},
			phase: schedv1alpha1.PodGroupPending, want: waiting{reason: reasons.QueueOverShare, message: overShare}},
		{name: "the scheduler's own filters", pods: []corev1.Pod{member("a", "", corev1.PodPending, "0/2 nodes are available: 2 node(s) had untolerated taint."), member("b", "", corev1.PodPending, "")},
			phase: schedv1alpha1.PodGroupPending, want: waiting{reason: reasons.NoNodeFits, message: "0/2 nodes are available: 2 node(s) had untolerated taint."}},
		{name: "placing: it does not wait", pods: []corev1.Pod{member("a", "", corev1.PodPending, doesNotFit), member("b", "", corev1.PodPending, doesNotFit)},
			phase: schedv1alpha1.PodGroupScheduling, placing: true},
		{name: "quorum bound: it does not wait, though a surplus member does", pods: []corev1.Pod{member("a", "n1", corev1.PodPending, ""), member("b", "n2", corev1.PodPending, ""), member("c", "", corev1.PodPending, doesNotFit)},
			phase: PodGroupScheduled},
		{name: "running", pods: []corev1.Pod{member("a", "n1", corev1.PodRunning, ""), member("b", "n2", corev1.PodRunning, "")}, phase: schedv1alpha1.PodGroupRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := waitingOf(pg, nil, tc.pods, schedv1alpha1.PodGroupStatus{Phase: tc.phase}, tc.placing, tc.retrier)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestComputeStatus(t *testing.T) {
	pg := podGroup("g", t0, 2)
	now := metav1.NewTime(t0.Add(time.Minute))
	pod := func(name, node string, phase corev1.PodPhase) corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).Node(node).Phase(phase).Obj()
		return *p
	}
	for _, tc := range []struct {
		name    string
		pods    []corev1.Pod
		placing bool
		want    schedv1alpha1.PodGroupPhase
		running int32
		// was is the phase the group had; "" for none yet.
		was schedv1alpha1.PodGroupPhase
	}{
		{name: "no pods", want: schedv1alpha1.PodGroupPending},
		// An MPI job: its launcher succeeded, its workers were deleted.
		{name: "ran, one member succeeded, the rest gone", pods: []corev1.Pod{pod("launcher", "n1", corev1.PodSucceeded)},
			was: schedv1alpha1.PodGroupRunning, want: schedv1alpha1.PodGroupFinished},
		{name: "never ran: one succeeded pod is not the gang's end", pods: []corev1.Pod{pod("a", "n1", corev1.PodSucceeded)},
			want: schedv1alpha1.PodGroupScheduling},
		{name: "ran, one succeeded, a replacement waits", pods: []corev1.Pod{pod("a", "n1", corev1.PodSucceeded), pod("b", "", corev1.PodPending)},
			was: schedv1alpha1.PodGroupRunning, want: schedv1alpha1.PodGroupScheduling},
		{name: "placing", pods: []corev1.Pod{pod("a", "", corev1.PodPending), pod("b", "", corev1.PodPending)}, placing: true, want: schedv1alpha1.PodGroupScheduling},
		{name: "quorum bound", pods: []corev1.Pod{pod("a", "n1", corev1.PodPending), pod("b", "n2", corev1.PodPending)}, want: PodGroupScheduled},
		{name: "running", pods: []corev1.Pod{pod("a", "n1", corev1.PodRunning), pod("b", "n2", corev1.PodRunning)}, want: schedv1alpha1.PodGroupRunning, running: 2},
		{name: "finished", pods: []corev1.Pod{pod("a", "n1", corev1.PodSucceeded), pod("b", "n2", corev1.PodSucceeded)}, want: schedv1alpha1.PodGroupFinished},
		{name: "failed", pods: []corev1.Pod{pod("a", "n1", corev1.PodFailed), pod("b", "n2", corev1.PodRunning)}, want: schedv1alpha1.PodGroupFailed, running: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := pg.DeepCopy()
			group.Status.Phase = tc.was
			got := computeStatus(group, nil, tc.pods, tc.placing, now)
			assert.Equal(t, tc.want, got.Phase)
			assert.Equal(t, tc.running, got.Running)
			assert.Equal(t, tc.want == schedv1alpha1.PodGroupPending, got.ScheduleStartTime.IsZero())
		})
	}
	// Pods of a same-named group in another namespace are not counted.
	other := pod("x", "n1", corev1.PodRunning)
	other.Namespace = "elsewhere"
	assert.Equal(t, int32(0), computeStatus(pg, nil, []corev1.Pod{other}, false, now).Running)
}

// With roles, the phase waits for every role's minimum: a Ray-style gang
// (head 1, workers 2; minMember 3) whose workers run without its head is
// not Running, nor Scheduled while its head is not bound.
func TestComputeStatusCountsRoles(t *testing.T) {
	pg := podGroup("g", t0, 3)
	pg.Annotations = map[string]string{flotillav1alpha1.RolesAnnotation: `[{"name": "head", "minMember": 1, "selector": {"matchLabels": {"ray.io/node-type": "head"}}},
		{"name": "workers", "minMember": 2, "selector": {"matchLabels": {"ray.io/node-type": "worker"}}}]`}
	roles, err := flotillav1alpha1.ParseRoles(pg.Annotations, pg.Spec.MinMember)
	require.NoError(t, err)
	now := metav1.NewTime(t0.Add(time.Minute))
	pod := func(name, kind, node string, phase corev1.PodPhase) corev1.Pod {
		return *st.MakePod().Namespace("ns").Name(name).Label("ray.io/node-type", kind).Node(node).Phase(phase).Obj()
	}
	for _, tc := range []struct {
		name string
		pods []corev1.Pod
		want schedv1alpha1.PodGroupPhase
	}{
		{name: "three workers run, the head waits: not running", want: schedv1alpha1.PodGroupScheduling,
			pods: []corev1.Pod{pod("w1", "worker", "n1", corev1.PodRunning), pod("w2", "worker", "n2", corev1.PodRunning), pod("w3", "worker", "n3", corev1.PodRunning), pod("h", "head", "", corev1.PodPending)}},
		{name: "head bound, not yet running: scheduled", want: PodGroupScheduled,
			pods: []corev1.Pod{pod("w1", "worker", "n1", corev1.PodRunning), pod("w2", "worker", "n2", corev1.PodRunning), pod("h", "head", "n3", corev1.PodPending)}},
		{name: "head and two workers run: running", want: schedv1alpha1.PodGroupRunning,
			pods: []corev1.Pod{pod("w1", "worker", "n1", corev1.PodRunning), pod("w2", "worker", "n2", corev1.PodRunning), pod("h", "head", "n3", corev1.PodRunning)}},
		{name: "a worker succeeded, its sibling and the head run: running", want: schedv1alpha1.PodGroupRunning,
			pods: []corev1.Pod{pod("w1", "worker", "n1", corev1.PodSucceeded), pod("w2", "worker", "n2", corev1.PodRunning), pod("h", "head", "n3", corev1.PodRunning)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, computeStatus(pg, roles, tc.pods, false, now).Phase)
			assert.NotEqual(t, schedv1alpha1.PodGroupRunning, computeStatus(pg, roles, tc.pods[:1], false, now).Phase, "one member alone never runs the gang")
		})
	}
}
