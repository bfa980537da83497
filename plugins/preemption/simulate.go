package preemption

import (
	"context"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	pluginnames "k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

// This file is the simulation that confirms a plan: the victims (and the
// pods terminating where the preemptor may go) gone from a copy of the
// nodes, the preemptor's members placed there by the gang planner
// (package planner, the question Gang's quorum check asks), each member
// also passing every Filter of the profile, and the queues' admission.

// simulate removes the victims (and the terminating pods) and places the
// preemptor's members with the gang planner, each on a node with room
// that passes every Filter plugin for the preemptor, counting nominated
// pods. The preemptor's queue must admit it with the victims' share given
// back.
func (s *search) simulate(victims []*unit, nodes []fwk.NodeInfo) (map[types.UID]string, bool) {
	who := s.who
	return s.simulateIn(who.topology, victims, nodes)
}

// simulateIn is simulate with the domains given (some of them pinned by
// the caller), not the preemptor's own.
func (s *search) simulateIn(topo *planner.Topology, victims []*unit, nodes []fwk.NodeInfo) (map[types.UID]string, bool) {
	who, w := s.who, s.w
	if !w.admits(who, victims) {
		return nil, false
	}
	sc := s.newScene(nodes)
	if sc == nil || !sc.removeUnits(victims) {
		return nil, false
	}
	return sc.plan(who.members, topo, nodes)
}

// plan asks the gang planner where the members go in the scene: over the
// nodes less the pods gone, the devices those pods held free again,
// inside the domains of topo (nil: anywhere), every member judged as
// Gang's plan judges it (its own spec and claims, member by member) and
// by the profile's filters (sc.filter). It returns each member's node.
func (sc *scene) plan(members []*corev1.Pod, topo *planner.Topology, nodes []fwk.NodeInfo) (map[types.UID]string, bool) {
	who := sc.who
	inScene := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		inScene[i] = sc.node(n.Node().Name)
	}
	snap := planner.Snapshot{Nodes: inScene, Filter: sc.filter}
	if who.devices != nil {
		free := make(map[string]capacity.Resources, len(nodes))
		for _, n := range nodes {
			free[n.Node().Name] = sc.freeDevicesOn(n.Node().Name)
		}
		snap.Devices, snap.Freed = who.devices, sc.freedDevices()
		snap.FreeDevices = func(n fwk.NodeInfo) capacity.Resources { return free[n.Node().Name] }
	}
	name := who.pod.Namespace + "/" + who.pod.Name
	if who.inGroup {
		name = who.group.String()
	}
	planned := planner.Place(sc.ctx, snap, planner.Gang{Name: name, MinMember: int32(len(members)), Quorum: planner.Quorum{Required: members}, Topology: topo})
	if planned.Reason != "" {
		return nil, false
	}
	placement := make(map[types.UID]string, len(members))
	for _, slot := range planned.Slots {
		for _, m := range slot.Pods {
			placement[m.UID] = slot.Node
		}
	}
	return placement, len(placement) == len(members)
}

// memberFits reports whether the planner places member m on the node in
// the scene, as it would place it in a plan there: its own requests and
// devices on what the scene left (the members placed before it taken),
// its own spec, its claims and the profile's filters. The claims of the
// members placed before it on the node are not handed to the allocator:
// the plan of the whole placement confirms them (memberByMember).
func (sc *scene) memberFits(m sized, name string) bool {
	_, ok := sc.plan([]*corev1.Pod{m.Pod}, nil, []fwk.NodeInfo{sc.node(name)})
	return ok
}

// filter runs every Filter plugin for the preemptor on the scene's node,
// counting nominated pods; the members are taken to share the
// preemptor's other constraints (pod affinity, ports, volumes). What the
// filters say of resources, devices, selectors and taints is said of the
// preemptor's spec: a member of another shape (a role's leader beside its
// workers) has its own checked by the planner, so such a refusal for the
// preemptor alone is none for it. (The filters that run after the
// refusing one then go unchecked for such a member.)
func (sc *scene) filter(m *corev1.Pod, ni fwk.NodeInfo) bool {
	status := sc.handle.RunFilterPluginsWithNominatedPods(sc.ctx, sc.cycle, sc.who.pod, ni)
	if status.IsSuccess() {
		return true
	}
	switch status.Plugin() {
	case pluginnames.NodeResourcesFit, pluginnames.DynamicResources, pluginnames.NodeAffinity, pluginnames.TaintToleration, pluginnames.NodeUnschedulable:
		for _, s := range sc.who.largest() {
			if s.UID == m.UID {
				return !sc.who.sameShape(s)
			}
		}
	}
	return false
}

// admits reports whether the preemptor's queue admits it once the victims'
// share is given back.
func (w *world) admits(who *preemptor, victims []*unit) bool {
	if w.view == nil {
		return true
	}
	released := w.base()
	// A gang's pods are in its queue, so the unit's queue is each pod's.
	eachVictimPod(victims, func(u *unit, i int) {
		if w.charged.Charged(u.members[i].info.GetPod()) {
			w.view.Release(released, u.queue, u.memberRequests()[i])
		}
	})
	_, reason := w.view.Refuses(who.queue, who.request, released)
	return reason == ""
}

// sized is a member with its request, computed once: a simulation asks
// for it on every node.
type sized struct {
	*corev1.Pod
	request capacity.Resources
	info    fwk.PodInfo // nil if the pod's affinity terms do not parse
}

// largest returns the preemptor's members sized and largest first, made
// on first use. Each one's pod info has its resources computed before it
// is shared: plans on several nodes at once add it to their copies of the
// nodes, which would otherwise each compute (and cache) them.
func (who *preemptor) largest() []sized {
	who.sizedOnce.Do(func() {
		requestOf := who.requestOf
		if requestOf == nil {
			requestOf = capacity.Request
		}
		out := make([]sized, len(who.members))
		for i, p := range who.members {
			out[i] = sized{Pod: p, request: requestOf(p)}
			out[i].request.Add(who.demand[p.UID])
			if info, err := framework.NewPodInfo(p); err == nil {
				info.CalculateResource()
				out[i].info = info
			}
		}
		sort.SliceStable(out, func(i, j int) bool { return out[j].request.Less(out[i].request) })
		who.sized = out
	})
	return who.sized
}

// scene is the cluster being changed by a simulation: copies of the nodes
// it touched and of the cycle state, which the PreFilter extensions keep
// in step with every pod removed or added.
type scene struct {
	handle  fwk.Handle
	ctx     context.Context
	who     *preemptor
	w       *world
	cycle   fwk.CycleState
	clones  map[string]fwk.NodeInfo
	removed map[types.UID]bool
	// devices are the copies of nodes' free DRA devices the scene changed,
	// for a preemptor that asks for them (see freeDevicesOn).
	devices map[string]capacity.Resources
	// gone are the pods removed, in order (removed by UID): the planner's
	// allocator sees the devices they free (freedDevices).
	gone   []*corev1.Pod
	parent *scene // a fork reads the nodes it has not copied from here
}

// newScene starts from the snapshot less the pods terminating on the nodes
// the preemptor may go to. (Terminating pods elsewhere still count for
// the filters that look beyond the node, as DefaultPreemption counts them;
// removing every one of them for each node tried would copy every node
// they run on, for every node.)
func (s *search) newScene(nodes []fwk.NodeInfo) *scene {
	ctx, base, who, w := s.ctx, s.cycle, s.who, s.w
	sc := &scene{handle: s.handle, ctx: ctx, who: who, w: w, cycle: base.Clone(), clones: map[string]fwk.NodeInfo{}, removed: map[types.UID]bool{}, devices: map[string]capacity.Resources{}}
	if who.freeDevices != nil {
		// DynamicResources' Filter sees the victims' claims allocated
		// until the resourceclaim controller deallocates them, after the
		// victims are gone: the scene counts the members' devices against
		// each node's free devices plus those the victims give back
		// instead. (Its Filter has no AddPod/RemovePod to keep in step.)
		sc.cycle.SetSkipFilterPlugins(sets.New(pluginnames.DynamicResources).Union(sc.cycle.GetSkipFilterPlugins()))
	}
	for _, n := range nodes {
		name := n.Node().Name
		for _, info := range w.terminatingOn(name) {
			if !sc.remove(member{info: info, node: name}) {
				return nil
			}
		}
	}
	return sc
}

// fork starts a trial on top of the scene that leaves the scene as it is.
func (sc *scene) fork() *scene {
	f := &scene{handle: sc.handle, ctx: sc.ctx, who: sc.who, w: sc.w, cycle: sc.cycle.Clone(), clones: map[string]fwk.NodeInfo{}, removed: map[types.UID]bool{}, devices: map[string]capacity.Resources{}, parent: sc}
	for uid := range sc.removed {
		f.removed[uid] = true
	}
	f.gone = slices.Clone(sc.gone)
	return f
}

func (sc *scene) node(name string) fwk.NodeInfo {
	if c, ok := sc.clones[name]; ok {
		return c
	}
	if sc.parent != nil {
		return sc.parent.node(name)
	}
	return sc.w.byName[name]
}

func (sc *scene) mutable(name string) fwk.NodeInfo {
	if c, ok := sc.clones[name]; ok {
		return c
	}
	c := sc.node(name).Snapshot()
	sc.clones[name] = c
	return c
}

func (sc *scene) remove(m member) bool {
	if sc.removed[m.info.GetPod().UID] {
		return true
	}
	sc.removed[m.info.GetPod().UID] = true
	sc.gone = append(sc.gone, m.info.GetPod())
	ni := sc.mutable(m.node)
	if err := ni.RemovePod(klog.FromContext(sc.ctx), m.info.GetPod()); err != nil {
		return false
	}
	return sc.handle.RunPreFilterExtensionRemovePod(sc.ctx, sc.cycle, sc.who.pod, m.info, ni).IsSuccess()
}

func (sc *scene) removeUnits(units []*unit) bool {
	for _, u := range units {
		for i, m := range u.members {
			gone := sc.removed[m.info.GetPod().UID]
			if !sc.remove(m) {
				return false
			}
			if !gone {
				sc.addDevices(m.node, u.memberRequests()[i], 1)
			}
		}
	}
	return true
}

// freeDevicesOn is the node's free DRA devices in the scene, per key the
// preemptor asks under; the caller must not change it.
func (sc *scene) freeDevicesOn(name string) capacity.Resources {
	if c, ok := sc.devices[name]; ok {
		return c
	}
	if sc.parent != nil {
		return sc.parent.freeDevicesOn(name)
	}
	return sc.who.freeDevices(sc.w.byName[name].Node())
}

// addDevices adds sign × the devices r holds to the node's free devices
// in the scene: a victim's given back (+1), a member's taken (-1). Keys a
// node has in allocatable are its NodeInfo's, not devices.
func (sc *scene) addDevices(name string, r capacity.Resources, sign int64) {
	if sc.who.freeDevices == nil {
		return
	}
	ni := sc.node(name)
	var own capacity.Resources
	for _, key := range sc.who.deviceKeys {
		if r[key] == 0 || capacity.AllocatableAmount(ni, key) > 0 {
			continue
		}
		if own == nil {
			if own = sc.devices[name]; own == nil {
				own = sc.freeDevicesOn(name).Clone()
				sc.devices[name] = own
			}
		}
		own[key] += sign * r[key]
	}
}

// sameShape reports whether m is judged as the preemptor is: it asks for
// what the preemptor asks for, and its spec allows the same nodes (the
// same node selector, affinity and tolerations).
func (who *preemptor) sameShape(m sized) bool {
	for _, s := range who.largest() {
		if s.UID == who.pod.UID {
			return s.request.Equal(m.request) && sameSpec(s.Pod, m.Pod)
		}
	}
	return true
}

// sameSpec reports whether two pods' specs allow the same nodes.
func sameSpec(a, b *corev1.Pod) bool {
	return equality.Semantic.DeepEqual(a.Spec.NodeSelector, b.Spec.NodeSelector) &&
		equality.Semantic.DeepEqual(nodeAffinityOf(a), nodeAffinityOf(b)) &&
		equality.Semantic.DeepEqual(a.Spec.Tolerations, b.Spec.Tolerations)
}

func nodeAffinityOf(pod *corev1.Pod) *corev1.NodeAffinity {
	if pod.Spec.Affinity == nil {
		return nil
	}
	return pod.Spec.Affinity.NodeAffinity
}

// freedDevices are the devices the pods gone from the scene give back
// once their claims are deallocated.
func (sc *scene) freedDevices() []structured.DeviceID {
	var freed []structured.DeviceID
	leaving := func(uid types.UID) bool { return sc.removed[uid] }
	for _, pod := range sc.gone {
		freed = append(freed, sc.w.store.Devices().ReleasedDevices(pod, leaving)...)
	}
	return freed
}

func (sc *scene) place(m sized, name string) bool {
	info := m.info
	if info == nil {
		return false
	}
	ni := sc.mutable(name)
	ni.AddPodInfo(info)
	sc.addDevices(name, m.request, -1)
	return sc.handle.RunPreFilterExtensionAddPod(sc.ctx, sc.cycle, sc.who.pod, info, ni).IsSuccess()
}
