package preemption

import (
	"context"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

// plan is a set of victims and where the preemptor's pods go once they
// are gone.
type plan struct {
	victims   []*unit
	placement map[types.UID]string
}

// pods are the victims' pods, each once (a whole gang subsumes its
// surplus members).
func (pl *plan) pods() []member {
	seen := map[types.UID]bool{}
	var out []member
	for _, u := range pl.victims {
		for _, m := range u.members {
			if uid := m.info.GetPod().UID; !seen[uid] {
				seen[uid] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// cost ranks plans: fewer PDB-protected victims, then a lower top victim
// priority, then fewer victims.
func (pl *plan) cost() [3]int64 {
	var protected int64
	top := int64(-1 << 31)
	for _, u := range pl.victims {
		if u.protected {
			protected++
		}
		top = max(top, int64(u.priority))
	}
	return [3]int64{protected, top, int64(len(pl.pods()))}
}

func cheaper(a, b [3]int64) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// planPod finds, on every node where the pod failed for reasons eviction
// can cure, the fewest victims that make room, and takes the cheapest node.
func (p *Preemption) planPod(ctx context.Context, cycle fwk.CycleState, who *preemptor, w *world, statuses fwk.NodeToStatusReader) (*plan, string) {
	candidates, err := statuses.NodesForStatusCode(p.handle.SnapshotSharedLister().NodeInfos(), fwk.Unschedulable)
	if err != nil {
		return nil, err.Error()
	}
	var mu sync.Mutex
	var best *plan
	consider := func(pl *plan) {
		mu.Lock()
		defer mu.Unlock()
		if best == nil || cheaper(pl.cost(), best.cost()) {
			best = pl
		}
	}
	p.handle.Parallelizer().Until(ctx, len(candidates), func(i int) {
		node := candidates[i]
		name := node.Node().Name
		var here []*unit
		for _, u := range w.units {
			if u.touches(name) {
				here = append(here, u)
			}
		}
		if len(here) == 0 && len(w.terminating[name]) == 0 {
			return
		}
		only := []fwk.NodeInfo{node}
		fits := func(victims []*unit) (map[types.UID]string, bool) {
			return p.simulate(ctx, cycle, who, w, victims, only)
		}
		if pl := minimal(w.sequence(who, here), fits); pl != nil {
			consider(pl)
		}
	}, Name)
	if best == nil {
		return nil, fmt.Sprintf("no node has room for %s even without the pods it may evict", who.what)
	}
	return best, ""
}

// planGang finds the fewest victims that make room for all the members the
// gang still needs, placed together; or nothing.
func (p *Preemption) planGang(ctx context.Context, cycle fwk.CycleState, who *preemptor, w *world) (*plan, string) {
	fits := func(victims []*unit) (map[types.UID]string, bool) {
		return p.simulate(ctx, cycle, who, w, victims, w.nodes)
	}
	seq := w.sequence(who, w.units)
	if pl := minimal(seq, fits); pl != nil {
		return pl, ""
	}
	return nil, fmt.Sprintf("even evicting all %d pods it may evict would not make room for the %d members %s needs", countPods(seq), len(who.members), who.what)
}

func countPods(units []*unit) int {
	return len((&plan{victims: units}).pods())
}

// minimal returns the plan with the fewest victims from seq that fits: no
// victims at all if terminating pods already make room, else the shortest
// fitting prefix with every victim it can do without given back, most
// important first. nil if even all of seq does not fit.
func minimal(seq []*unit, fits func([]*unit) (map[types.UID]string, bool)) *plan {
	if placement, ok := fits(nil); ok {
		return &plan{placement: placement}
	}
	if len(seq) == 0 {
		return nil
	}
	if _, ok := fits(seq); !ok {
		return nil
	}
	// Taking more leaves more room, so the fitting prefixes are those at
	// least as long as the shortest.
	k := sort.Search(len(seq), func(i int) bool {
		_, ok := fits(seq[:i+1])
		return ok
	}) + 1
	chosen := append([]*unit(nil), seq[:k]...)
	for i := len(chosen) - 1; i >= 0; i-- {
		trial := append(append([]*unit(nil), chosen[:i]...), chosen[i+1:]...)
		if _, ok := fits(trial); ok {
			chosen = trial
		}
	}
	placement, _ := fits(chosen)
	return &plan{victims: chosen, placement: placement}
}

// simulate removes the victims (and the terminating pods) and places the
// preemptor's members, largest first, each on the first node with room
// that passes every Filter plugin for the preemptor, counting nominated
// pods. The preemptor's queue must admit it with the victims' share given
// back.
func (p *Preemption) simulate(ctx context.Context, base fwk.CycleState, who *preemptor, w *world, victims []*unit, nodes []fwk.NodeInfo) (map[types.UID]string, bool) {
	removed := map[types.UID]bool{}
	var leaving []member
	for _, u := range victims {
		for _, m := range u.members {
			if !removed[m.info.GetPod().UID] {
				removed[m.info.GetPod().UID] = true
				leaving = append(leaving, m)
			}
		}
	}
	if w.view != nil {
		released := state.Released{}
		for _, m := range leaving {
			if pod := m.info.GetPod(); w.queues.Charged(pod) {
				w.view.Release(released, w.queues.QueueOf(pod), state.Request(pod))
			}
		}
		if _, reason := w.view.Refuses(who.queue, who.request, released); reason != "" {
			return nil, false
		}
	}

	logger := klog.FromContext(ctx)
	cycle := base.Clone()
	clones := map[string]fwk.NodeInfo{}
	clone := func(name string) fwk.NodeInfo {
		if c, ok := clones[name]; ok {
			return c
		}
		c := w.byName[name].Snapshot()
		clones[name] = c
		return c
	}
	remove := func(m member) bool {
		ni := clone(m.node)
		if err := ni.RemovePod(logger, m.info.GetPod()); err != nil {
			return false
		}
		return p.handle.RunPreFilterExtensionRemovePod(ctx, cycle, who.pod, m.info, ni).IsSuccess()
	}
	for name, infos := range w.terminating {
		for _, info := range infos {
			if !remove(member{info: info, node: name}) {
				return nil, false
			}
		}
	}
	for _, m := range leaving {
		if !remove(m) {
			return nil, false
		}
	}

	members := append([]*corev1.Pod(nil), who.members...)
	sort.SliceStable(members, func(i, j int) bool { return state.Request(members[j]).Less(state.Request(members[i])) })
	placement := make(map[types.UID]string, len(members))
	for _, m := range members {
		request := state.Request(m)
		placed := false
		for _, n := range nodes {
			name := n.Node().Name
			ni := n
			if c, ok := clones[name]; ok {
				ni = c
			}
			if !request.FitsIn(state.FreeOf(ni)) {
				continue
			}
			if !p.handle.RunFilterPluginsWithNominatedPods(ctx, cycle, who.pod, ni).IsSuccess() {
				continue
			}
			info, err := framework.NewPodInfo(m)
			if err != nil {
				return nil, false
			}
			ni = clone(name)
			ni.AddPodInfo(info)
			if !p.handle.RunPreFilterExtensionAddPod(ctx, cycle, who.pod, info, ni).IsSuccess() {
				return nil, false
			}
			placement[m.UID] = name
			placed = true
			break
		}
		if !placed {
			return nil, false
		}
	}
	return placement, true
}
