package state

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

func groupMember(name string, cpu int64, node string, phase corev1.PodPhase) *corev1.Pod {
	pod := sized(name, capacity.Resources{corev1.ResourceCPU: cpu, corev1.ResourceMemory: cpu << 20})
	pod.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "g"}
	pod.Spec.NodeName = node
	pod.Status.Phase = phase
	return pod
}

// StillNeeded is the one answer to "which members must fit for this gang
// to run": the member being scheduled first, then the smallest pending
// ones, as many as the quorum still lacks.
func TestStillNeeded(t *testing.T) {
	tests := []struct {
		name      string
		minMember int32
		pods      []*corev1.Pod
		reserved  []string
		first     string
		want      []string
		wantShort int
	}{
		{name: "smallest first", minMember: 2,
			pods: []*corev1.Pod{groupMember("big", 4000, "", ""), groupMember("small", 1000, "", ""), groupMember("mid", 2000, "", "")},
			want: []string{"small", "mid"}},
		{name: "the member being scheduled is among them whatever its size", minMember: 2,
			pods:  []*corev1.Pod{groupMember("big", 4000, "", ""), groupMember("small", 1000, "", ""), groupMember("mid", 2000, "", "")},
			first: "big", want: []string{"big", "small"}},
		{name: "bound, reserved and succeeded members count toward the quorum", minMember: 4,
			pods: []*corev1.Pod{groupMember("bound", 1000, "n1", corev1.PodRunning), groupMember("done", 1000, "n1", corev1.PodSucceeded),
				groupMember("reserved", 1000, "", ""), groupMember("a", 3000, "", ""), groupMember("b", 2000, "", "")},
			reserved: []string{"reserved"}, want: []string{"b"}},
		{name: "quorum reached: nothing is needed", minMember: 1,
			pods: []*corev1.Pod{groupMember("bound", 1000, "n1", corev1.PodRunning), groupMember("a", 1000, "", "")}},
		{name: "too few pending", minMember: 4,
			pods: []*corev1.Pod{groupMember("a", 1000, "", ""), groupMember("b", 1000, "", "")},
			want: []string{"a", "b"}, wantShort: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: tt.minMember}}
			s := NewStatic([]*schedv1alpha1.PodGroup{pg}, tt.pods)
			byName := map[string]*corev1.Pod{}
			for _, p := range tt.pods {
				byName[p.Name] = p
			}
			var got []*corev1.Pod
			var short int
			s.Lock(func(locked *Locked) {
				g := locked.Gang(GroupKey{Namespace: "ns", Name: "g"})
				for _, name := range tt.reserved {
					locked.ReserveMember(g, byName[name], "n2")
				}
				got, short = locked.StillNeeded(g, pg, byName[tt.first])
			})
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			assert.Equal(t, tt.want, names)
			assert.Equal(t, tt.wantShort, short)
		})
	}
}

// The profiles of one scheduler share one queue accounting: a second
// profile that names another default queue is refused, with both profiles
// and both queues named, instead of its pods landing in the first's.
func TestProfilesMustShareTheDefaultQueue(t *testing.T) {
	s := NewStatic(nil, nil)
	s.parts.queues, s.parts.queuesProfile = staticQueues(), "flotilla-scheduler"
	_, err := s.EnableQueues(handletest.New(t, "default-scheduler"), "other")
	require.Error(t, err)
	for _, want := range []string{`"other"`, `"default-scheduler"`, `"default"`, `"flotilla-scheduler"`} {
		assert.True(t, strings.Contains(err.Error(), want), "%q in %q", want, err)
	}
	q, err := s.EnableQueues(handletest.New(t, "default-scheduler"), "default")
	require.NoError(t, err)
	assert.Same(t, s.Queues(), q)
}

// Shared builds a plugin's per-scheduler part once, however many profiles
// ask for it.
func TestSharedBuildsOncePerScheduler(t *testing.T) {
	s := NewStatic(nil, nil)
	builds := 0
	build := func() (*int, error) { builds++; v := builds; return &v, nil }
	a, err := Shared(s, "part", build)
	require.NoError(t, err)
	b, err := Shared(s, "part", build)
	require.NoError(t, err)
	assert.Same(t, a, b)
	assert.Equal(t, 1, builds)
	other, _ := Shared(NewStatic(nil, nil), "part", build)
	assert.NotSame(t, a, other, "another scheduler has its own")
}
