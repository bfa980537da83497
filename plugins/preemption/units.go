package preemption

import (
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// This file is the victim units a survey finds: a pod, a gang's surplus
// member or a whole gang, with what each gives back once it is gone.

// member is one pod of a victim unit and the node it runs on.
type member struct {
	info fwk.PodInfo
	node string
}

// unit is what is evicted together: one pod, or a whole gang.
type unit struct {
	members []member
	// requests are the members' requests and gives their sum, computed on
	// first use (once, though plans on several nodes may ask at once): a
	// survey finds every pod of the cluster, a plan reads a few of them,
	// each many times.
	requests    []capacity.Resources
	gives       capacity.Resources
	requestOnce sync.Once
	// w is the world the unit was surveyed in (nil in unit tests that build
	// units by hand): it knows which devices the preemptor counts.
	w         *world
	queue     string
	priority  int32 // the highest of its members
	whole     bool  // a whole gang
	protected bool  // evicting it alone overruns a PodDisruptionBudget
	reclaim   bool  // from another queue
	newest    time.Time
}

// request is what the unit's members request together; memberRequests
// what each requests.
func (u *unit) request() capacity.Resources {
	u.computeRequests()
	return u.gives
}

func (u *unit) memberRequests() []capacity.Resources {
	u.computeRequests()
	return u.requests
}

func (u *unit) computeRequests() {
	u.requestOnce.Do(func() {
		u.gives = capacity.Resources{}
		for _, m := range u.members {
			r := capacity.Occupied(m.info)
			if u.w != nil && u.w.who != nil && u.w.who.devices != nil {
				r = u.w.devicesGivenBack(u, m, r)
			}
			u.requests = append(u.requests, r)
			u.gives.Add(r)
		}
	})
}

// devicesGivenBack is r, a victim member's requests, with the DRA devices
// the preemptor asks for counted as evicting it gives them back
// (devices.View.GivenBack): those of its allocated claims no pod outside
// its unit uses.
func (w *world) devicesGivenBack(u *unit, m member, r capacity.Resources) capacity.Resources {
	inUnit := func(uid types.UID) bool {
		for _, other := range u.members {
			if other.info.GetPod().UID == uid {
				return true
			}
		}
		return false
	}
	freed := w.store.Devices().ReleasedDevices(m.info.GetPod(), inUnit)
	node := w.byName[m.node]
	gives, err := w.who.devices.GivenBack(r, freed, w.who.deviceKeys, func(key corev1.ResourceName) bool {
		return node != nil && capacity.AllocatableAmount(node, key) > 0
	})
	if err != nil {
		klog.Background().V(4).Info("Counting a victim's devices", "pod", klog.KObj(m.info.GetPod()), "err", err)
	}
	return gives
}

// terminatingGives is what a terminating pod gives back once it is gone:
// its requests, but the DRA devices the preemptor asks for, which its
// claims hold until they are deallocated (the devices' free count shows
// them then).
func (w *world) terminatingGives(info fwk.PodInfo, node fwk.NodeInfo) capacity.Resources {
	r := capacity.Occupied(info)
	if w.who == nil || w.who.devices == nil {
		return r
	}
	for _, key := range w.who.deviceKeys {
		if capacity.AllocatableAmount(node, key) == 0 {
			delete(r, key)
		}
	}
	return r
}

// touchesAny reports whether a member of the unit runs on one of the nodes.
func (u *unit) touchesAny(nodes map[string]bool) bool {
	for _, m := range u.members {
		if nodes[m.node] {
			return true
		}
	}
	return false
}

// unitsByNode lists, per node, the units with a member on it, in the order
// given: what planning reads per node without scanning every unit for
// every node (20000 victims on 5000 nodes would be 10^8 checks).
func unitsByNode(units []*unit) map[string][]*unit {
	out := map[string][]*unit{}
	for _, u := range units {
		for i, m := range u.members {
			if !slices.ContainsFunc(u.members[:i], func(o member) bool { return o.node == m.node }) {
				out[m.node] = append(out[m.node], u)
			}
		}
	}
	return out
}

// found is a pod the survey found, with its queue and whether the
// preemptor may evict it.
type found struct {
	member
	queue             string
	eligible, reclaim bool
}

// newUnit makes the candidates one unit (a pod, or a whole gang).
func (w *world) newUnit(cs []found, whole bool) *unit {
	u := &unit{w: w, whole: whole, priority: corev1helpers.PodPriority(cs[0].info.GetPod()), queue: cs[0].queue}
	for _, c := range cs {
		pod := c.info.GetPod()
		u.members = append(u.members, c.member)
		u.priority = max(u.priority, corev1helpers.PodPriority(pod))
		u.reclaim = u.reclaim || c.reclaim
		if t := startTime(pod); t.After(u.newest) {
			u.newest = t
		}
	}
	// Protected: its members alone already overrun a budget.
	u.protected = budgetViolations(u.members, w.pdbs) > 0
	return u
}

// unitsAt returns the units with a member on the node, least important
// first: onDemand, the node's single pods made units now (by one caller
// per node at a time) with the gang units there.
func (w *world) unitsAt(node string) []*unit {
	if !w.onDemand {
		return w.unitsOn[node]
	}
	var out []*unit
	for _, info := range w.byName[node].GetPods() {
		pod := info.GetPod()
		if _, leaving := w.leavingPods[pod.UID]; pod.DeletionTimestamp != nil || leaving {
			continue
		}
		if _, ok := w.inGang(pod); ok {
			continue // in the gang units
		}
		if c := w.classify(info, node); c.eligible {
			out = append(out, w.newUnit([]found{c}, false))
		}
	}
	if len(out) == 0 {
		return w.unitsOn[node]
	}
	out = append(out, w.unitsOn[node]...)
	sort.SliceStable(out, func(i, j int) bool { return lessImportant(out[i], out[j]) })
	return out
}

// terminatingOn returns the pods leaving the node: being deleted, or
// chosen by another eviction in flight.
func (w *world) terminatingOn(node string) []fwk.PodInfo {
	if !w.onDemand {
		return w.terminating[node]
	}
	var out []fwk.PodInfo
	for _, info := range w.byName[node].GetPods() {
		pod := info.GetPod()
		if _, leaving := w.leavingPods[pod.UID]; pod.DeletionTimestamp != nil || leaving {
			out = append(out, info)
		}
	}
	return out
}

// podOn finds a pod on a node by UID.
func podOn(node fwk.NodeInfo, uid types.UID) fwk.PodInfo {
	if node == nil {
		return nil
	}
	for _, info := range node.GetPods() {
		if info.GetPod().UID == uid {
			return info
		}
	}
	return nil
}
