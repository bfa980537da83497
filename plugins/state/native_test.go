package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nativev1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

func nativeGroup(name string, minCount int32, edit ...func(*nativev1beta1.PodGroup)) *nativev1beta1.PodGroup {
	pg := &nativev1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: "1"}}
	if minCount > 0 {
		pg.Spec.SchedulingPolicy.Gang = &nativev1beta1.GangSchedulingPolicy{MinCount: minCount}
	} else {
		pg.Spec.SchedulingPolicy.Basic = &nativev1beta1.BasicSchedulingPolicy{}
	}
	for _, e := range edit {
		e(pg)
	}
	return pg
}

func inWorkload(name string) func(*nativev1beta1.PodGroup) {
	return func(pg *nativev1beta1.PodGroup) {
		pg.Spec.WorkloadRef = &nativev1beta1.WorkloadReference{WorkloadName: name, TemplateName: "workers"}
	}
}

// A native PodGroup is read as the gang model every policy reads: its
// gang's minCount the quorum, its topology constraint the required level,
// its queue its own label else its Workload's; a basic group is no gang.
func TestProject(t *testing.T) {
	workload := &nativev1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", Labels: map[string]string{flotillav1alpha1.QueueLabel: "from-workload"}}}
	tests := []struct {
		name         string
		group        *nativev1beta1.PodGroup
		workload     *nativev1beta1.Workload
		wantGang     bool
		wantMin      int32
		wantQueue    string
		wantRequired string
	}{
		{name: "gang: minCount is the quorum", group: nativeGroup("g", 4), wantGang: true, wantMin: 4},
		{name: "basic: no gang", group: nativeGroup("g", 0)},
		{name: "topology constraint: the required level", wantGang: true, wantMin: 2, wantRequired: "nvidia.com/gpu.clique",
			group: nativeGroup("g", 2, func(pg *nativev1beta1.PodGroup) {
				pg.Spec.SchedulingConstraints = &nativev1beta1.PodGroupSchedulingConstraints{Topology: []nativev1beta1.TopologyConstraint{{Key: "nvidia.com/gpu.clique"}}}
			})},
		{name: "queue from the Workload", group: nativeGroup("g", 2, inWorkload("w")), workload: workload, wantGang: true, wantMin: 2, wantQueue: "from-workload"},
		{name: "the group's own queue wins over its Workload's", workload: workload, wantGang: true, wantMin: 2, wantQueue: "own",
			group: nativeGroup("g", 2, inWorkload("w"), func(pg *nativev1beta1.PodGroup) {
				pg.Labels = map[string]string{flotillav1alpha1.QueueLabel: "own"}
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Project(tt.group, tt.workload)
			if !tt.wantGang {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, tt.wantMin, got.Spec.MinMember)
			assert.Equal(t, tt.wantQueue, got.Labels[flotillav1alpha1.QueueLabel])
			assert.Equal(t, tt.wantRequired, got.Annotations[flotillav1alpha1.TopologyRequiredAnnotation])
		})
	}
}

// A pod's group is the native one its spec.schedulingGroup names, whatever
// its label says (kube-scheduler's pod-group cycle schedules it); the
// label's group is said to be ignored. Keys of the two kinds never match.
func TestGroupOfNativeWins(t *testing.T) {
	labelled := func(group string) map[string]string {
		if group == "" {
			return nil
		}
		return map[string]string{schedv1alpha1.PodGroupLabel: group}
	}
	tests := []struct {
		name        string
		label       string
		native      string
		want        GroupKey
		wantIgnored string
	}{
		{name: "label only", label: "a", want: GroupKey{Namespace: "ns", Name: "a"}},
		{name: "native only", native: "b", want: GroupKey{Namespace: "ns", Name: "b", Native: true}},
		{name: "both: the native group wins", label: "a", native: "b", want: GroupKey{Namespace: "ns", Name: "b", Native: true}, wantIgnored: "a"},
		{name: "same name, both kinds: still the native one", label: "a", native: "a", want: GroupKey{Namespace: "ns", Name: "a", Native: true}, wantIgnored: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: labelled(tt.label)}}
			if tt.native != "" {
				pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(tt.native)}
			}
			got, ok := GroupOf(pod)
			require.True(t, ok)
			assert.Equal(t, tt.want, got)
			ignored, both := BothGroups(pod)
			assert.Equal(t, tt.wantIgnored != "", both)
			if both {
				assert.Equal(t, GroupKey{Namespace: "ns", Name: tt.wantIgnored}, ignored)
			}
		})
	}
	assert.NotEqual(t, GroupKey{Namespace: "ns", Name: "a"}.String(), GroupKey{Namespace: "ns", Name: "a", Native: true}.String())
}

// The store answers for native groups by key: their projection, their
// members (indexed by spec.schedulingGroup), their queue labels — also a
// basic group's — and whether they go only whole.
func TestStoreReadsNativeGroups(t *testing.T) {
	member := func(name, group string) *corev1.Pod {
		pod := groupMember(name, 1000, "", "")
		pod.Labels = nil
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
		return pod
	}
	whole := nativeGroup("whole", 2, func(pg *nativev1beta1.PodGroup) {
		pg.Spec.DisruptionMode = &nativev1beta1.DisruptionMode{All: &nativev1beta1.AllDisruptionMode{}}
	})
	basic := nativeGroup("basic", 0, inWorkload("w"))
	workload := &nativev1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", Labels: map[string]string{flotillav1alpha1.QueueLabel: "q"}}}
	s := WithNative(NewStatic(nil, []*corev1.Pod{member("w-0", "whole"), member("w-1", "whole"), member("b-0", "basic")}),
		[]*nativev1beta1.PodGroup{whole, basic}, []*nativev1beta1.Workload{workload})

	wholeKey := GroupKey{Namespace: "ns", Name: "whole", Native: true}
	basicKey := GroupKey{Namespace: "ns", Name: "basic", Native: true}
	require.NotNil(t, s.PodGroup(wholeKey))
	assert.Same(t, s.PodGroup(wholeKey), s.PodGroup(wholeKey), "projected once per resourceVersion")
	assert.Nil(t, s.PodGroup(basicKey), "a basic group is no gang")
	assert.Nil(t, s.PodGroup(GroupKey{Namespace: "ns", Name: "whole"}), "no scheduler-plugins group of that name")
	assert.Len(t, s.Members(wholeKey), 2)
	assert.Equal(t, "q", s.GroupLabels(basicKey)[flotillav1alpha1.QueueLabel])
	assert.True(t, s.Native().DisruptedWhole(wholeKey))
	assert.False(t, s.Native().DisruptedWhole(basicKey))
	assert.True(t, s.HasPodGroups())
}

// A native group is told why it waits once per new message per plugin: an
// unchanged message records no second event, an empty one forgets, and a
// deleted group's messages are forgotten with it.
func TestNativeGroupsTell(t *testing.T) {
	whole := nativeGroup("whole", 2)
	s := WithNative(NewStatic(nil, nil), []*nativev1beta1.PodGroup{whole}, nil)
	key := GroupKey{Namespace: "ns", Name: "whole", Native: true}
	recorder := events.NewFakeRecorder(10)
	tell := func(source, message string) { s.Native().Tell(recorder, key, source, message) }
	tell("Gang", "InsufficientResources: gang ns/whole does not fit")
	tell("Gang", "InsufficientResources: gang ns/whole does not fit")
	tell("Proportion", "QueueOverShare: queue q is over its share")
	tell("Gang", "")
	tell("Gang", "InsufficientResources: gang ns/whole does not fit")
	(tracker{s}).forgetNativeGroup(whole)
	tell("Proportion", "QueueOverShare: queue q is over its share")
	s.Native().Tell(recorder, GroupKey{Namespace: "ns", Name: "missing", Native: true}, "Gang", "InsufficientResources: nothing to tell it to")
	close(recorder.Events)
	var got []string
	for e := range recorder.Events {
		got = append(got, e)
	}
	assert.Equal(t, []string{
		"Normal InsufficientResources InsufficientResources: gang ns/whole does not fit",
		"Normal QueueOverShare QueueOverShare: queue q is over its share",
		"Normal InsufficientResources InsufficientResources: gang ns/whole does not fit",
		"Normal QueueOverShare QueueOverShare: queue q is over its share",
	}, got)
	assert.Same(t, whole, s.Native().Group(key))
	assert.Nil(t, s.Native().Group(GroupKey{Namespace: "ns", Name: "whole"}), "a scheduler-plugins key names no native group")
	assert.NotNil(t, s.Native().Informer())
	assert.Nil(t, NewStatic(nil, nil).Native().Informer(), "no native groups without the gate")
}

// The queue labels a native group's members read: the group's own, else
// its Workload's, for a gang as for a basic group; none for a group that
// does not exist, a Workload that does not, or a store without native
// groups (the gate off).
func TestNativeGroupLabels(t *testing.T) {
	labelled := func(queue string) func(*nativev1beta1.PodGroup) {
		return func(pg *nativev1beta1.PodGroup) { pg.Labels = map[string]string{flotillav1alpha1.QueueLabel: queue} }
	}
	workload := &nativev1beta1.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", Labels: map[string]string{flotillav1alpha1.QueueLabel: "from-workload"}}}
	groups := []*nativev1beta1.PodGroup{
		nativeGroup("gang-own", 4, labelled("own"), inWorkload("w")),
		nativeGroup("gang-of-workload", 4, inWorkload("w")),
		nativeGroup("basic-own", 0, labelled("own"), inWorkload("w")),
		nativeGroup("basic-of-workload", 0, inWorkload("w")),
		nativeGroup("workload-missing", 4, inWorkload("gone")),
		nativeGroup("no-workload", 0),
	}
	s := WithNative(NewStatic(nil, nil), groups, []*nativev1beta1.Workload{workload})
	tests := []struct {
		group string
		want  string
	}{
		{"gang-own", "own"},
		{"gang-of-workload", "from-workload"},
		{"basic-own", "own"},
		{"basic-of-workload", "from-workload"},
		{"workload-missing", ""},
		{"no-workload", ""},
		{"missing", ""},
	}
	for _, tc := range tests {
		t.Run(tc.group, func(t *testing.T) {
			assert.Equal(t, tc.want, s.GroupLabels(GroupKey{Namespace: "ns", Name: tc.group, Native: true})[flotillav1alpha1.QueueLabel])
		})
	}
	assert.Nil(t, NewStatic(nil, nil).GroupLabels(GroupKey{Namespace: "ns", Name: "gang-own", Native: true}), "no native groups without the gate")
	assert.Len(t, s.Native().Informer().GetIndexer().List(), len(groups), "the native groups' informer")
	assert.Nil(t, NewStatic(nil, nil).Native().Informer(), "none without the gate")
}
