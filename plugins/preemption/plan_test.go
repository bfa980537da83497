package preemption

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

func victimUnit(t *testing.T, name string, cpu int64, priority int32, whole bool) *unit {
	t.Helper()
	pod := &corev1.Pod{}
	pod.Name, pod.UID = name, types.UID(name)
	pod.Spec.Priority = &priority
	pod.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: state.Resources{corev1.ResourceCPU: cpu}.List()}}}
	info, err := framework.NewPodInfo(pod)
	assert.NoError(t, err)
	return &unit{members: []member{{info: info, node: "n"}}, priority: priority, whole: whole}
}

func cpuOf(units []*unit) int64 {
	var sum int64
	for _, m := range (&plan{victims: units}).pods() {
		sum += state.Request(m.info.GetPod())[corev1.ResourceCPU]
	}
	return sum
}

func names(pl *plan) []string {
	var out []string
	for _, m := range pl.pods() {
		out = append(out, m.info.GetPod().Name)
	}
	return out
}

// The shortest fitting prefix, then every victim it can do without given
// back, most important first: needing 3 cpu from [1, 1, 2, 1] (least
// important first) takes the first three and gives b back, the more
// important of the two it can spare (volcano #5994 evicted 10 where 1 did).
func TestMinimalGivesBackVictimsNotNeeded(t *testing.T) {
	seq := []*unit{victimUnit(t, "a", 1000, 1, false), victimUnit(t, "b", 1000, 2, false), victimUnit(t, "c", 2000, 3, false), victimUnit(t, "d", 1000, 4, false)}
	calls := 0
	fits := func(victims []*unit) (map[types.UID]string, bool) {
		calls++
		return nil, cpuOf(victims) >= 3000
	}
	pl := minimal(seq, fits)
	assert.ElementsMatch(t, []string{"a", "c"}, names(pl))
	assert.Less(t, calls, 12, "binary search, not one call per prefix and subset")

	assert.Nil(t, minimal(seq, func(victims []*unit) (map[types.UID]string, bool) { return nil, cpuOf(victims) >= 99000 }), "nothing when even all do not fit")
	free := minimal(seq, func([]*unit) (map[types.UID]string, bool) { return nil, true })
	assert.NotNil(t, free)
	assert.Empty(t, free.victims, "no victims when room is already free")
}

func TestVictimOrder(t *testing.T) {
	single := victimUnit(t, "single-high", 1000, 50, false)
	whole := victimUnit(t, "whole-low", 1000, 1, true)
	protected := victimUnit(t, "protected-low", 1000, 1, false)
	protected.protected = true
	low := victimUnit(t, "single-low", 1000, 1, false)
	newer := victimUnit(t, "single-low-newer", 1000, 1, false)
	newer.newest = time.Now()
	bigGang := victimUnit(t, "whole-low-big", 1000, 1, true)
	bigGang.members = append(bigGang.members, bigGang.members[0], bigGang.members[0])
	want := []*unit{newer, low, single, whole, bigGang, protected}
	for i := range want {
		for j := i + 1; j < len(want); j++ {
			assert.True(t, lessImportant(want[i], want[j]), "%s before %s", want[i].members[0].info.GetPod().Name, want[j].members[0].info.GetPod().Name)
			assert.False(t, lessImportant(want[j], want[i]))
		}
	}
}

// A reclaim takes from the victim's queue and its ancestors below the one
// it shares with the preemptor's, never below their deserved share on a
// resource the preemptor asks for.
func TestReclaimKeepsVictimQueuesAtTheirShare(t *testing.T) {
	cpu := func(v int64) state.Resources { return state.Resources{corev1.ResourceCPU: v} }
	view := &state.QueueView{Queues: map[string]*state.QueueInfo{
		"root":  {Name: "root", Allocated: cpu(20000), Deserved: cpu(20000), Reclaimable: true},
		"team":  {Name: "team", Parent: "root", Allocated: cpu(14000), Deserved: cpu(10000), Reclaimable: true},
		"bob":   {Name: "bob", Parent: "team", Allocated: cpu(14000), Deserved: cpu(10000), Reclaimable: true},
		"alice": {Name: "alice", Parent: "root", Allocated: cpu(6000), Deserved: cpu(10000), Reclaimable: true},
	}, Available: cpu(20000)}
	assert.Equal(t, []string{"bob", "team"}, queueNames(reclaimPath(view, "bob", "alice")))
	assert.Empty(t, reclaimPath(view, "root", "alice"), "an ancestor is shared")

	w := &world{view: view, leaving: state.Released{}}
	who := &preemptor{queue: "alice", request: cpu(4000)}
	var units []*unit
	for i := 0; i < 6; i++ {
		u := victimUnit(t, fmt.Sprintf("bob-%d", i), 1000, 0, false)
		u.queue, u.reclaim = "bob", true
		units = append(units, u)
	}
	assert.Len(t, w.sequence(who, units), 4, "bob is 4 cpu above its share: 4 of 6 may go")

	w.leaving = state.Released{"bob": cpu(3000), "team": cpu(3000), "root": cpu(3000)}
	assert.Len(t, w.sequence(who, units), 1, "3 already leaving in another eviction")
}

func queueNames(qs []*state.QueueInfo) []string {
	var out []string
	for _, q := range qs {
		out = append(out, q.Name)
	}
	return out
}
