package gang

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// Each queueing hint re-queues a gated or refused member only for the
// events that can let it proceed.
func TestQueueingHints(t *testing.T) {
	a := members("a", 3, "1")
	plain := st.MakePod().Namespace("ns").Name("plain").UID("plain").Obj()
	refused, orphaned := members("refused", 3, "1"), members("orphaned", 3, "1")
	pods := append(append(append(a, members("short", 1, "1")...), refused...), orphaned[1:]...)
	g, _ := testGang(t, []*schedv1alpha1.PodGroup{podGroup("a", t0, 3), podGroup("short", t0, 3), podGroup("refused", t0, 3), podGroup("orphaned", t0, 3)}, pods)
	// refused-0's check found the gang does not fit; orphaned-0 did the
	// same and has since been deleted.
	g.store.Lock(func(locked *state.Locked) {
		locked.Refuse(locked.Gang(state.GroupKey{Namespace: "ns", Name: "refused"}), "does not fit", refused[0])
		locked.Refuse(locked.Gang(state.GroupKey{Namespace: "ns", Name: "orphaned"}), "does not fit", orphaned[0])
	})
	// short's only member was held at PreEnqueue.
	require.NotNil(t, g.PreEnqueue(context.Background(), members("short", 1, "1")[0]))
	logger := klog.Background()
	tests := []struct {
		name string
		hint fwk.QueueingHintFn
		pod  *corev1.Pod
		obj  interface{}
		want fwk.QueueingHint
	}{
		{"member added completes the gang", hintsOf(g).isSchedulableAfterMemberAdded, a[0], a[2], fwk.Queue},
		{"member of another gang added", hintsOf(g).isSchedulableAfterMemberAdded, a[0], members("short", 2, "1")[1], fwk.QueueSkip},
		{"member added, gang still short", hintsOf(g).isSchedulableAfterMemberAdded, members("short", 1, "1")[0], members("short", 1, "1")[0], fwk.QueueSkip},
		{"plain pod added", hintsOf(g).isSchedulableAfterMemberAdded, a[0], plain, fwk.QueueSkip},
		{"added object of unknown type: be safe", hintsOf(g).isSchedulableAfterMemberAdded, a[0], "x", fwk.Queue},
		{"own PodGroup created or changed", hintsOf(g).isSchedulableAfterPodGroupChange, a[0], podGroup("a", t0, 2), fwk.Queue},
		{"another PodGroup changed", hintsOf(g).isSchedulableAfterPodGroupChange, a[0], podGroup("b", t0, 2), fwk.QueueSkip},
		{"PodGroup change for a plain pod", hintsOf(g).isSchedulableAfterPodGroupChange, plain, podGroup("a", t0, 2), fwk.QueueSkip},
		{"room freed, member of a gang not refused by its check", hintsOf(g).isSchedulableAfterRoomChange, a[0], nil, fwk.Queue},
		{"room freed, plain pod (not Gang's to wake)", hintsOf(g).isSchedulableAfterRoomChange, plain, nil, fwk.QueueSkip},
		{"room freed, the refused gang's retrier", hintsOf(g).isSchedulableAfterRoomChange, refused[0], nil, fwk.Queue},
		{"room freed, another member of the refused gang (its retrier checks for it)", hintsOf(g).isSchedulableAfterRoomChange, refused[1], nil, fwk.QueueSkip},
		{"room freed, refused gang whose retrier is gone: every member", hintsOf(g).isSchedulableAfterRoomChange, orphaned[1], nil, fwk.Queue},
		{"room freed, member held at PreEnqueue for its siblings", hintsOf(g).isSchedulableAfterRoomChange, members("short", 1, "1")[0], nil, fwk.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.hint(logger, tt.pod, nil, tt.obj)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}

	// PodGroup updates: only what gates or places the gang wakes it, not
	// the status and waiting reason the status writer keeps, whether the
	// informer gives typed or (the scheduler's dynamic one) unstructured
	// objects.
	edited := func(edit func(*schedv1alpha1.PodGroup)) *schedv1alpha1.PodGroup {
		pg := podGroup("a", t0, 3)
		pg.Generation = 1
		pg.Labels = map[string]string{flotillav1alpha1.QueueLabel: "team-a"}
		pg.Annotations = map[string]string{flotillav1alpha1.RolesAnnotation: `{"leader":{"minMember":1},"worker":{"minMember":2}}`}
		if edit != nil {
			edit(pg)
		}
		return pg
	}
	unstructuredOf := func(pg *schedv1alpha1.PodGroup) interface{} {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pg)
		require.NoError(t, err)
		return &unstructured.Unstructured{Object: obj}
	}
	updates := []struct {
		name string
		new  *schedv1alpha1.PodGroup
		want fwk.QueueingHint
	}{
		{"status only", edited(func(pg *schedv1alpha1.PodGroup) {
			pg.Status.Phase, pg.Status.Running = schedv1alpha1.PodGroupScheduling, 2
		}), fwk.QueueSkip},
		{"waiting reason written", edited(func(pg *schedv1alpha1.PodGroup) {
			pg.Annotations[flotillav1alpha1.WaitingReasonAnnotation], pg.Annotations[flotillav1alpha1.WaitingMessageAnnotation] = "WaitingForMembers", "2 of 3"
		}), fwk.QueueSkip},
		{"minMember lowered: a new generation", edited(func(pg *schedv1alpha1.PodGroup) { pg.Generation, pg.Spec.MinMember = 2, 2 }), fwk.Queue},
		{"roles changed", edited(func(pg *schedv1alpha1.PodGroup) {
			pg.Annotations[flotillav1alpha1.RolesAnnotation] = `{"leader":{"minMember":1},"worker":{"minMember":1}}`
		}), fwk.Queue},
		{"topology asked", edited(func(pg *schedv1alpha1.PodGroup) {
			pg.Annotations[flotillav1alpha1.TopologyRequiredAnnotation] = "topology.kubernetes.io/zone"
		}), fwk.Queue},
		{"moved to another queue", edited(func(pg *schedv1alpha1.PodGroup) { pg.Labels[flotillav1alpha1.QueueLabel] = "team-b" }), fwk.Queue},
	}
	for _, tt := range updates {
		for _, form := range []struct {
			name     string
			old, new interface{}
		}{{"typed", edited(nil), tt.new}, {"unstructured", unstructuredOf(edited(nil)), unstructuredOf(tt.new)}} {
			t.Run("PodGroup updated, "+tt.name+", "+form.name, func(t *testing.T) {
				got, err := hintsOf(g).isSchedulableAfterPodGroupChange(logger, a[0], form.old, form.new)
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			})
		}
	}

	// Claims: only freed devices (or a new claim) wake a refused gang.
	claim := func(allocated bool) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
		if allocated {
			c.Status.Allocation = &resourceapi.AllocationResult{}
		}
		return c
	}
	// A member sharing claim c with others waits until it is allocated.
	sharer := refused[0].DeepCopy()
	sharer.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "shared", ResourceClaimName: ptr.To("c")}}
	claims := []struct {
		name     string
		pod      *corev1.Pod
		old, new interface{}
		want     fwk.QueueingHint
	}{
		{"claim created", nil, nil, claim(false), fwk.Queue},
		{"claim allocated", nil, claim(false), claim(true), fwk.QueueSkip},
		{"a claim the member shares allocated", sharer, claim(false), claim(true), fwk.Queue},
		{"a claim the member shares updated, still unallocated", sharer, claim(false), claim(false), fwk.QueueSkip},
		{"claim reserved again, still allocated", nil, claim(true), claim(true), fwk.QueueSkip},
		{"claim deallocated", nil, claim(true), claim(false), fwk.Queue},
		{"allocated claim deleted", nil, claim(true), nil, fwk.Queue},
		{"unallocated claim deleted", nil, claim(false), nil, fwk.QueueSkip},
	}
	for _, tt := range claims {
		t.Run(tt.name, func(t *testing.T) {
			pod := refused[0]
			if tt.pod != nil {
				pod = tt.pod
			}
			got, err := hintsOf(g).isSchedulableAfterClaimChange(logger, pod, tt.old, tt.new)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// A binding is an assigned pod's Add, and the queue runs the hints of the
// plugin that gates a pod at PreEnqueue for every pod it gates whenever one
// of that plugin's events happens. So no event Gang registers may match a
// binding, or every binding of a big gang costs a hint run per gated member
// of the gangs still being created; a member's creation (an unscheduled
// pod's Add) is the event that completes a count. A member that arrives
// bound is reported by the store instead (TestMemberArrivingBoundWakesItsGang
// in test/integration).
func TestEventsToRegisterSkipBindings(t *testing.T) {
	g, _ := testGang(t, nil, nil)
	events, err := g.EventsToRegister(context.Background())
	require.NoError(t, err)
	var onCreation bool
	for _, e := range events {
		assert.False(t, framework.MatchClusterEvents(e.Event, framework.EventAssignedPodAdd), "event %s matches a binding", e.Event.Label())
		onCreation = onCreation || framework.MatchClusterEvents(e.Event, framework.EventUnscheduledPodAdd)
	}
	assert.True(t, onCreation, "a member's creation re-queues its gated siblings")
}

// hintsOf is the plugin's queueing hints, as New makes them, for a plugin a
// test builds without New.
func hintsOf(g *Gang) *queueingHints {
	if g.hints == nil {
		g.hints = &queueingHints{store: g.store}
	}
	return g.hints
}
