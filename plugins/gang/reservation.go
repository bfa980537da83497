package gang

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/config"
	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
	"github.com/flotilla-sched/flotilla/plugins/state/reservations"
)

// replanEvery bounds how often a gang's reservation is planned again: a
// gang refused on every pod that ends on its nodes would otherwise run
// the soonest-plan search each time.
const replanEvery = 2 * time.Second

// reserver holds room for gangs that do not fit now (see doc.go,
// Reservation): it plans their reservations and keeps other pods off the
// room held.
type reserver struct {
	args config.ReservationArgs
	book *reservations.Book
	// job finds a pod's Job, for the Job's run bound; nil when the
	// scheduler has no Job informer.
	job func(namespace, name string) *batchv1.Job
	now func() time.Time
}

// newReserver is the profile's reserver, or nil when reservation is off.
// The book is the scheduler's: every profile's Filter keeps pods off the
// same holds.
func newReserver(store *state.Store, h fwk.Handle, args config.ReservationArgs) (*reserver, error) {
	if args.MaxGangs == 0 {
		return nil, nil
	}
	r := &reserver{args: args, book: reservations.For(store), now: time.Now}
	if factory := h.SharedInformerFactory(); factory != nil {
		jobs := factory.Batch().V1().Jobs().Lister()
		r.job = func(namespace, name string) *batchv1.Job {
			j, err := jobs.Jobs(namespace).Get(name)
			if err != nil {
				return nil
			}
			return j
		}
	}
	// A deleted PodGroup's reservation ends with it.
	if _, err := state.Shared(store, Name+"/reservations", func() (bool, error) {
		if _, err := store.Informers().PodGroups.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: r.forgetDeleted}); err != nil {
			return false, err
		}
		return true, store.Native().OnDelete(r.forgetDeletedGroup)
	}); err != nil {
		return nil, err
	}
	return r, nil
}

// forgetDeleted ends a deleted PodGroup's reservation.
func (r *reserver) forgetDeleted(obj interface{}) {
	if pg, ok := state.Unwrap(obj).(*schedv1alpha1.PodGroup); ok {
		r.forgetDeletedGroup(state.GroupKey{Namespace: pg.Namespace, Name: pg.Name})
	}
}

// holdsRoom reports whether some gang holds room now: then every pod's
// Filter must run.
func (r *reserver) holdsRoom() bool { return r != nil && !r.book.Holds().Empty() }

// Filter keeps a pod off room held for a gang it would delay
// (reservations.Judge): the gang's own members, pods of higher priority,
// pods that fit beside the hold and pods sure to be gone before the gang
// could start there pass.
func (g *Gang) Filter(_ context.Context, cycle fwk.CycleState, pod *corev1.Pod, node fwk.NodeInfo) *fwk.Status {
	r := g.reserve
	if r == nil {
		return nil
	}
	holds := r.book.Holds().On(node.Node().Name)
	if len(holds) == 0 {
		return nil
	}
	request, free := capacity.Request(pod), capacity.Resources(nil)
	if asked := askedDevicesOf(cycle); asked != nil {
		request, free = asked.request, asked.freeOn(node)
	}
	v := reservations.Judge(pod, request, node, free, holds, reservations.EndsBy(pod, reservations.JobOf(pod, r.job), r.now()))
	if !v.Kept() {
		return nil
	}
	return fwk.NewStatus(fwk.Unschedulable, reasons.RoomHeld.Say("%s", v.Message))
}

// askedDevicesKey holds, in the cycle state, the DRA devices a pod asks
// for, read once in PreFilter while some gang holds room: the Filter
// counts them against the devices free on a held node less those the
// holds keep.
const askedDevicesKey fwk.StateKey = "flotilla.dev/gang-asked-devices"

// askedDevices is a pod's requests with the DRA devices it asks for (by
// claim or by a DRA-backed extended resource) under their class keys, and
// the view a node's free devices are counted over. It is never changed
// once written.
type askedDevices struct {
	view    *devices.View
	keys    []corev1.ResourceName
	request capacity.Resources
}

func (a *askedDevices) Clone() fwk.StateData { return a }

// freeOn is, per key the pod asks for, the devices free on the node; nil
// when they cannot be counted (the pod then fits in no held room that
// holds nothing of them to spare).
func (a *askedDevices) freeOn(node fwk.NodeInfo) capacity.Resources {
	free, err := a.view.Catalog().FreeOn(node.Node(), a.keys)
	if err != nil {
		return nil
	}
	return free
}

// readAskedDevices writes the DRA devices the pod asks for into the cycle
// state (askedDevicesKey), when it asks for any and some gang holds room.
func (r *reserver) readAskedDevices(ctx context.Context, cycle fwk.CycleState, pod *corev1.Pod, reader *dra.Reader) {
	if !r.holdsRoom() || reader == nil {
		return
	}
	if key, ok := state.GroupOf(pod); ok && r.book.Get(key) != nil {
		return // its own gang's hold never keeps it off
	}
	view := reader.View(ctx, []*corev1.Pod{pod})
	request := view.Requests(pod)
	if demand, err := view.Catalog().Demand(pod); err == nil {
		request.Add(demand)
	}
	if keys := view.Keys(request); len(keys) > 0 {
		cycle.Write(askedDevicesKey, &askedDevices{view: view, keys: keys, request: request})
	}
}

// askedDevicesOf is what readAskedDevices wrote, or nil.
func askedDevicesOf(cycle fwk.CycleState) *askedDevices {
	if cycle == nil {
		return nil
	}
	data, err := cycle.Read(askedDevicesKey)
	if err != nil {
		return nil
	}
	asked, _ := data.(*askedDevices)
	return asked
}

// release ends the gang's reservation, saying why on its PodGroup.
func (r *reserver) release(g *Gang, pg *schedv1alpha1.PodGroup, key state.GroupKey, why string) {
	if r == nil {
		return
	}
	if held, ok := r.book.Release(key); ok {
		reservationsHeld.Set(float64(r.book.Len()))
		reservationSeconds.Observe(r.now().Sub(held.Since).Seconds())
		eventOnGroup(g, pg, key, corev1.EventTypeNormal, "RoomReleased", "Scheduling", "gang %s no longer holds room: %s", key, why)
	}
}

// heldBeside is the room the other gangs' reservations keep from a gang
// of the given priority, per node, as the Filter keeps it from its
// members: added to what the placing gangs' plans hold, so that no plan
// counts on held room its members could not take.
func (r *reserver) heldBeside(key state.GroupKey, priority int32, nodes []fwk.NodeInfo, held map[string]capacity.Resources) map[string]capacity.Resources {
	if r == nil {
		return held
	}
	holds := r.book.Holds()
	if holds.Empty() {
		return held
	}
	var out map[string]capacity.Resources
	for _, n := range nodes {
		for _, h := range holds.On(n.Node().Name) {
			if h.Gang == key || priority > h.Priority {
				continue
			}
			if out == nil {
				out = make(map[string]capacity.Resources, len(held)+1)
				for name, room := range held {
					out[name] = room.Clone()
				}
			}
			name := n.Node().Name
			if out[name] == nil {
				out[name] = capacity.Resources{}
			}
			out[name].Add(reservations.Remaining(h, n))
		}
	}
	if out == nil {
		return held
	}
	return out
}

// holdRoom plans where the gang's quorum will be placeable soonest, once
// running pods end, and holds that room (doc.go, Reservation); it says
// on the PodGroup why it holds nothing when it cannot. It returns the
// gang's reservation, nil when it holds none. It runs without the
// store's lock, for a gang whose quorum does not fit now.
func (r *reserver) holdRoom(ctx context.Context, g *Gang, pg *schedv1alpha1.PodGroup, key state.GroupKey, pod *corev1.Pod, in *planInputs, nodes []fwk.NodeInfo, topo *topology) *reservations.Reservation {
	if r == nil || in == nil {
		return nil
	}
	now := r.now()
	held := r.book.Get(key)
	if held != nil {
		r.countIdle(ctx, key, nodes, now, g.store.Devices())
	}
	if held != nil && now.Sub(held.Planned) < replanEvery {
		return held
	}
	if waited := now.Sub(g.store.GroupTime(key, pod.CreationTimestamp.Time)); waited < time.Duration(r.args.AfterSeconds)*time.Second {
		// Checked again when it has waited long enough, whatever the
		// events.
		g.shared.activateAfterBackoff(klog.FromContext(ctx), key, time.Duration(r.args.AfterSeconds)*time.Second-waited)
		return nil
	}
	if held == nil && r.book.Len() >= int(r.args.MaxGangs) {
		return nil
	}
	priority := corev1helpers.PodPriority(pod)
	soonest := func(nodes []fwk.NodeInfo) planner.Wait {
		snap, gang := g.plannerInputs(ctx, pg, in, false, nodes, topo)
		leaving := r.leaving(key, nodes, now, g.store.Devices())
		snap.Deallocating = deallocating(nodes, g.store.Devices())
		return planner.Soonest(ctx, snap, gang, leaving)
	}
	// Planned again, it keeps its nodes while its quorum still fits there
	// once their pods end: room half freed is not given up for room that
	// frees a little sooner elsewhere. Only when it no longer fits there
	// (a node left, a pod of higher priority took room) does it move.
	var wait planner.Wait
	if held != nil {
		var onHeld []fwk.NodeInfo
		for _, n := range nodes {
			if _, ok := held.Nodes[n.Node().Name]; ok {
				onHeld = append(onHeld, n)
			}
		}
		wait = soonest(onHeld)
	}
	if held == nil || wait.Reason != "" {
		wait = soonest(nodes)
	}
	if wait.Reason != "" {
		r.release(g, pg, key, "its quorum does not fit even once every running pod ends")
		eventOnGroup(g, pg, key, corev1.EventTypeWarning, "RoomNotHeld", "Scheduling",
			"gang %s holds no room: even once every running pod ends, %s", key, wait.Reason)
		return nil
	}
	res := &reservations.Reservation{Gang: key, Queue: queueOf(g.store, pod), Priority: priority, Nodes: map[string]reservations.NodeHold{}, Since: now, Planned: now, ReadyBy: wait.ReadyBy}
	for _, slot := range wait.Slots {
		hold := slot.Held.Clone()
		hold[corev1.ResourcePods] += int64(slot.Members)
		res.Nodes[slot.Node] = reservations.NodeHold{Held: hold}
	}
	// Each node is ready when the pods the gang waits for there are sure
	// to have ended, by the rule the whole wait is (planner.ReadyBy).
	waitsOn := map[string][]planner.Leaving{}
	for _, l := range wait.WaitsFor {
		res.WaitsFor = append(res.WaitsFor, l.Pod.Namespace+"/"+l.Pod.Name)
		waitsOn[l.Node] = append(waitsOn[l.Node], l)
	}
	for node, pods := range waitsOn {
		h := res.Nodes[node]
		h.ReadyBy = planner.ReadyBy(pods)
		res.Nodes[node] = h
	}
	if over := overShare(res, nodes, r.args.MaxClusterPercent); over != "" {
		r.release(g, pg, key, over)
		eventOnGroup(g, pg, key, corev1.EventTypeWarning, "RoomNotHeld", "Scheduling", "gang %s holds no room: %s", key, over)
		return nil
	}
	r.book.Hold(res)
	reservationsHeld.Set(float64(r.book.Len()))
	if held == nil || !sameNodes(held, res) {
		eventOnGroup(g, pg, key, corev1.EventTypeNormal, "RoomHeld", "Scheduling", "gang %s %s", key, res.Describe())
	}
	return res
}

// countIdle adds to flotilla_gang_reservation_idle_resource_seconds_total
// what the gang's hold keeps free and idle now, over the time since it was
// last counted.
func (r *reserver) countIdle(ctx context.Context, key state.GroupKey, nodes []fwk.NodeInfo, now time.Time, claims *dra.Reader) {
	seconds := r.book.Accrue(key, now).Seconds()
	if seconds <= 0 {
		return
	}
	holds := r.book.Holds()
	free := holds.FreeDevicesIn(ctx, claims)
	idle := capacity.Resources{}
	for _, n := range nodes {
		for _, h := range holds.On(n.Node().Name) {
			if h.Gang == key {
				idle.Add(reservations.Idle(h, n, free))
			}
		}
	}
	for name, v := range idle {
		if v > 0 {
			reservationIdle.WithLabelValues(string(name)).Add(float64(v) * seconds)
		}
	}
}

// leaving are the running pods on the nodes a reservation may wait for,
// but the gang's own members: what each gives back once it ends (its
// requests, pod slot and the DRA devices of the claims no other pod
// uses), and when it is sure to have ended (a pod being deleted, now).
func (r *reserver) leaving(key state.GroupKey, nodes []fwk.NodeInfo, now time.Time, claims *dra.Reader) []planner.Leaving {
	var out []planner.Leaving
	alone := func(types.UID) bool { return false }
	for _, n := range nodes {
		for _, p := range n.GetPods() {
			pod := p.GetPod()
			if k, ok := state.GroupOf(pod); ok && k == key {
				continue
			}
			gives := capacity.Occupied(p)
			gives[corev1.ResourcePods] = 1
			l := planner.Leaving{Pod: pod, Node: n.Node().Name, Gives: gives,
				EndsBy: reservations.EndsBy(pod, reservations.JobOf(pod, r.job), now)}
			if names, _ := devices.ClaimNames(pod); len(names) > 0 {
				l.Freed = claims.ReleasedDevices(pod, alone)
			}
			if pod.DeletionTimestamp != nil {
				l.EndsBy = now
			}
			out = append(out, l)
		}
	}
	return out
}

// deallocating are the devices, by node, of claims none of whose pods is
// on a node any more (dra.Reader.Deallocating): a pod that ended leaves
// its devices allocated until the resourceclaim controller deallocates
// them, and a plan of what frees soonest counts them free.
func deallocating(nodes []fwk.NodeInfo, claims *dra.Reader) map[string][]structured.DeviceID {
	if claims == nil {
		return nil
	}
	live := map[types.UID]bool{}
	for _, n := range nodes {
		for _, p := range n.GetPods() {
			live[p.GetPod().UID] = true
		}
	}
	return claims.Deallocating(func(uid types.UID) bool { return live[uid] })
}

// overShare says which resource the reservation would hold more of than
// the most one reservation may (maxClusterPercent), or "".
func overShare(res *reservations.Reservation, nodes []fwk.NodeInfo, percent int32) string {
	total := capacity.Resources{}
	for _, n := range nodes {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			total[name] += capacity.AllocatableAmount(n, name)
		}
		for name := range n.GetAllocatable().GetScalarResources() {
			total[name] += capacity.AllocatableAmount(n, name)
		}
	}
	sum := capacity.Resources{}
	for _, h := range res.Nodes {
		sum.Add(h.Held)
	}
	for name, v := range sum {
		if name == corev1.ResourcePods || total[name] <= 0 {
			continue
		}
		if v*100 > total[name]*int64(percent) {
			return fmt.Sprintf("it would hold %d of the cluster's %d %s, more than maxClusterPercent (%d%%)", v, total[name], name, percent)
		}
	}
	return ""
}

// queueOf is the pod's queue, "" when no plugin keeps queues: the queue
// its gang's held room is charged to.
func queueOf(store *state.Store, pod *corev1.Pod) string {
	if q := queues.Of(store); q != nil {
		return q.QueueOf(pod)
	}
	return ""
}

func sameNodes(a, b *reservations.Reservation) bool {
	if len(a.Nodes) != len(b.Nodes) {
		return false
	}
	for node := range a.Nodes {
		if _, ok := b.Nodes[node]; !ok {
			return false
		}
	}
	return true
}
