package gang

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

// The pacer lets held gangs in oldest first, as many as the room below the
// limit takes, and the oldest whatever its size.
func TestPacerRelease(t *testing.T) {
	key := func(name string) state.GroupKey { return state.GroupKey{Namespace: "ns", Name: name} }
	needs := map[string]int{"a": 8, "b": 2, "c": 3, "done": 0}
	for _, tc := range []struct {
		name     string
		held     []string
		room     int
		want     []string
		wantLeft []string
	}{
		{name: "no room: nobody", held: []string{"a", "b"}, room: 0, want: nil, wantLeft: []string{"a", "b"}},
		{name: "the oldest goes in whatever its size", held: []string{"a", "b"}, room: 1, want: []string{"a"}, wantLeft: []string{"b"}},
		{name: "as many as the room takes, oldest first", held: []string{"b", "c", "a"}, room: 5, want: []string{"b", "c"}, wantLeft: []string{"a"}},
		{name: "room beyond every need: all", held: []string{"b", "c"}, room: 100, want: []string{"b", "c"}, wantLeft: nil},
		{name: "a gang needing nothing more still counts one", held: []string{"done", "b"}, room: 1, want: []string{"done"}, wantLeft: []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p pacer
			for i, name := range tc.held {
				p.hold(key(name), t0.Add(time.Duration(i)*time.Second))
				p.hold(key(name), t0) // held once however many members are refused
			}
			got := p.release(tc.room, func(k state.GroupKey) int { return needs[k.Name] })
			var names []string
			for _, k := range got {
				names = append(names, k.Name)
			}
			assert.Equal(t, tc.want, names)
			var left []string
			for _, h := range p.held {
				left = append(left, h.key.Name)
			}
			assert.Equal(t, tc.wantLeft, left)
			assert.Equal(t, len(tc.wantLeft) > 0, p.holding())
		})
	}
}

// A gang let in and refused again goes back to its place by age, ahead
// of younger gangs held meanwhile, not to the end.
func TestPacerHoldsOldestFirst(t *testing.T) {
	key := func(name string) state.GroupKey { return state.GroupKey{Namespace: "ns", Name: name} }
	var p pacer
	p.hold(key("old"), t0)
	p.hold(key("young"), t0.Add(2*time.Second))
	require.Equal(t, []state.GroupKey{key("old")}, p.release(1, func(state.GroupKey) int { return 1 }))
	p.hold(key("younger"), t0.Add(3*time.Second))
	p.hold(key("middle"), t0.Add(time.Second))
	p.hold(key("old"), t0) // let in, refused again
	var order []string
	for _, h := range p.held {
		order = append(order, h.key.Name)
	}
	assert.Equal(t, []string{"old", "middle", "young", "younger"}, order)
}

// No gang starts while maxMembersInFlight members of gangs are placed and
// not bound; attempts under way go on; the held gang is activated once the
// backlog drains and then starts though it is larger than the limit.
func TestPreFilterPacesGangsByTheBindingBacklog(t *testing.T) {
	nodes := []fwk.NodeInfo{nodeInfo("n0", "8"), nodeInfo("n1", "8"), nodeInfo("n2", "8")}
	a, b := members("a", 2, "1"), members("b", 3, "1")
	g, h := testGang(t, []*schedv1alpha1.PodGroup{podGroup("a", t0, 2), podGroup("b", t0, 3)}, append(append([]*corev1.Pod{}, a...), b...))
	g.shared.maxInFlight = 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.shared.pace(ctx, 2)

	for i, pod := range a {
		_, status := g.PreFilter(ctx, framework.NewCycleState(), pod, nodes)
		require.True(t, status.IsSuccess(), "a-%d: %s", i, status.Message())
		require.Nil(t, g.Reserve(ctx, framework.NewCycleState(), pod, "n0"))
	}
	_, status := g.PreFilter(ctx, framework.NewCycleState(), b[0], nodes)
	require.Equal(t, fwk.Unschedulable, status.Code(), status.Message())
	assert.Equal(t, "WaitingForBindings: gang ns/b waits: 2 or more members of gangs are placed and not yet bound (maxMembersInFlight); it starts as they bind", status.Message())
	_, again := g.PreFilter(ctx, framework.NewCycleState(), b[1], nodes)
	assert.Equal(t, status.Message(), again.Message(), "the same words every time")
	time.Sleep(3 * pacingTick)
	assert.False(t, h.activated["ns/b-0"], "not activated while the backlog is full")

	// a's members bind: the store forgets them as in flight.
	g.store.Lock(func(locked *state.Locked) {
		gang := locked.Gang(state.GroupKey{Namespace: "ns", Name: "a"})
		for _, pod := range a {
			locked.UnreserveMember(gang, pod.UID)
		}
		assert.Zero(t, locked.MembersInFlight())
	})
	require.Eventually(t, func() bool { return h.activated["ns/b-0"] && h.activated["ns/b-2"] }, 5*time.Second, 20*time.Millisecond)
	assert.False(t, g.shared.pacer.holding())
	_, status = g.PreFilter(ctx, framework.NewCycleState(), b[0], nodes)
	assert.True(t, status.IsSuccess(), "a gang larger than the limit starts below it: %s", status.Message())
}
