package devices

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// A count of free devices per class rules a node out; it never rules one
// in. Two classes can match the same device (a count per class counts it
// twice), a request's selectors or constraints can reject devices the
// class accepts, a prioritized list falls back per node. The Ledger
// answers what a count cannot, member by member, as DynamicResources'
// Filter will in that member's own cycle: the structured allocator, built
// with the scheduler's features, allocates the member's claims on the node
// the plan gives it, with every device earlier members of the plan (and
// other placing gangs' members planned on the node) took marked
// allocated. A plan whose members the Ledger placed is one the
// scheduler's own Filter agrees with, device for device, as long as
// nothing else allocates meanwhile.

// allocateTimeout bounds one allocator run: the allocator may backtrack
// exhaustively over a node's devices, and a plan runs inside a scheduling
// cycle. A run cut short counts as the node refusing the member.
const allocateTimeout = 2 * time.Second

// Ledger allocates the claims of a plan's members one by one, keeping
// what each fit of the plan (capacity.Fit, by id) took so the plan's
// search can go back to an earlier fit and try another domain. Not safe
// for concurrent use; one per check.
type Ledger struct {
	c   *Catalog
	ctx context.Context
	// state is the catalog's allocated state with the applied frames' and
	// held claims' devices added; the allocator reads it by reference, so
	// it changes only between allocator runs, and every change drops the
	// allocator (it caches counters per pool on first use).
	state     structured.AllocatedState
	allocator structured.Allocator
	// applied are the frames in the state, oldest first; recorded every
	// frame ever filled, to apply again when the search returns to it.
	applied  []*frame
	recorded map[uint64]*frame
	// heldOn: nodes whose held claims (Catalog.Hold) are in the state.
	heldOn map[string]bool
	// refused counts, per pod, the nodes the allocator refused it on.
	refused map[types.UID]int
	err     error
}

// frame is what one fit's members took.
type frame struct {
	id    uint64
	taken []allocatedDevice
}

// allocatedDevice is one device of an allocation result, as the
// scheduler's allocated state records it (dra's foreachAllocatedDevice).
type allocatedDevice struct {
	id       structured.DeviceID
	shared   *structured.SharedDeviceID
	consumed *structured.DeviceConsumedCapacity
}

// Ledger starts allocating member by member over the catalog's allocated
// state (a copy: the counts keep reading the catalog's own).
func (c *Catalog) Ledger(ctx context.Context) (*Ledger, error) {
	if err := c.v.Err(); err != nil {
		return nil, err
	}
	state := structured.AllocatedState{}
	if c.v != nil && c.v.allocated != nil {
		allocated := c.v.allocated
		state.AllocatedDevices = allocated.AllocatedDevices.Clone()
		state.AllocatedSharedDeviceIDs = allocated.AllocatedSharedDeviceIDs.Clone()
		if allocated.AggregatedCapacity != nil {
			state.AggregatedCapacity = allocated.AggregatedCapacity.Clone()
		}
	}
	if state.AllocatedDevices == nil {
		state.AllocatedDevices = sets.New[structured.DeviceID]()
	}
	if state.AllocatedSharedDeviceIDs == nil {
		state.AllocatedSharedDeviceIDs = sets.New[structured.SharedDeviceID]()
	}
	if state.AggregatedCapacity == nil {
		state.AggregatedCapacity = structured.ConsumedCapacityCollection{}
	}
	return &Ledger{c: c, ctx: ctx, state: state, recorded: map[uint64]*frame{}, heldOn: map[string]bool{}, refused: map[types.UID]int{}}, nil
}

// Free marks devices allocated now as free for every member the ledger
// places: a preemption's victims' devices, which their claims give back
// once the victims are gone.
func (l *Ledger) Free(ids []structured.DeviceID) {
	if len(ids) == 0 {
		return
	}
	l.allocator = nil
	l.state.AllocatedDevices.Delete(ids...)
}

// Needs reports whether the pod asks for devices the allocator must
// place: claims not allocated yet (as Demand read them), or an extended
// resource a DeviceClass serves (on nodes whose allocatable lacks it).
func (l *Ledger) Needs(pod *corev1.Pod) bool {
	if len(l.c.claimsOf[pod.UID]) > 0 {
		return true
	}
	for name := range capacity.Request(pod) {
		if l.c.v.IsDeviceKey(name) {
			return true
		}
	}
	return false
}

// Err is the first error an allocator run returned that was not about a
// node (a broken slice, a class that cannot compile): the check cannot
// judge and says so.
func (l *Ledger) Err() error { return l.err }

// Refused is how many nodes the allocator refused the pod on.
func (l *Ledger) Refused(pod *corev1.Pod) int { return l.refused[pod.UID] }

// Place reports whether the pod's claims can be allocated on the node
// after the fits chain names (oldest first, the last being the fit the
// pod is placed in) took theirs; when they can, the devices are recorded
// under that last fit.
func (l *Ledger) Place(chain []uint64, pod *corev1.Pod, node *corev1.Node) bool {
	l.rewind(chain)
	l.holdOn(node)
	claims := l.claimsFor(pod, node)
	if len(claims) == 0 {
		return true
	}
	results, ok := l.allocate(node, claims)
	if !ok {
		l.refused[pod.UID]++
		return false
	}
	top := l.applied[len(l.applied)-1]
	for _, r := range results {
		for _, d := range devicesOf(r, l.c.v.features.ConsumableCapacity) {
			top.taken = append(top.taken, d)
			l.insert(d)
		}
	}
	return true
}

// allocate runs the allocator over the current state.
func (l *Ledger) allocate(node *corev1.Node, claims []*resourceapi.ResourceClaim) ([]resourceapi.AllocationResult, bool) {
	if l.allocator == nil {
		a, err := newAllocator(l.ctx, l.c.v, l.state)
		if err != nil {
			if l.err == nil {
				l.err = err
			}
			return nil, false
		}
		l.allocator = a
	}
	ctx, cancel := context.WithTimeout(l.ctx, allocateTimeout)
	defer cancel()
	results, err := l.allocator.Allocate(ctx, node, claims)
	if err != nil {
		if !errors.Is(err, structured.ErrFailedAllocationOnNode) && !errors.Is(err, context.DeadlineExceeded) && l.err == nil {
			l.err = fmt.Errorf("allocating on node %s: %w", node.Name, err)
		}
		return nil, false
	}
	return results, results != nil
}

// rewind makes the applied frames those chain names.
func (l *Ledger) rewind(chain []uint64) {
	common := 0
	for common < len(l.applied) && common < len(chain) && l.applied[common].id == chain[common] {
		common++
	}
	for len(l.applied) > common {
		top := l.applied[len(l.applied)-1]
		for _, d := range top.taken {
			l.remove(d)
		}
		l.applied = l.applied[:len(l.applied)-1]
	}
	for _, id := range chain[common:] {
		f := l.recorded[id]
		if f == nil {
			f = &frame{id: id}
			l.recorded[id] = f
		}
		for _, d := range f.taken {
			l.insert(d)
		}
		l.applied = append(l.applied, f)
	}
}

// holdOn allocates, once per node, the claims other placing gangs'
// members planned on it hold (Catalog.Hold), before any member of this
// check: their plans were made first. Their devices stay taken whatever
// fit the search returns to.
func (l *Ledger) holdOn(node *corev1.Node) {
	if l.heldOn[node.Name] {
		return
	}
	l.heldOn[node.Name] = true
	claims := l.c.heldClaims[node.Name]
	if len(claims) == 0 {
		return
	}
	results, ok := l.allocate(node, claims)
	if !ok {
		// Their own cycles will find out; this check plans around what
		// it can see.
		return
	}
	for _, r := range results {
		for _, d := range devicesOf(r, l.c.v.features.ConsumableCapacity) {
			l.insert(d)
		}
	}
}

func (l *Ledger) insert(d allocatedDevice) {
	l.allocator = nil
	switch {
	case d.shared != nil:
		l.state.AllocatedSharedDeviceIDs.Insert(*d.shared)
		if d.consumed != nil {
			l.state.AggregatedCapacity.Insert(*d.consumed)
		}
	default:
		l.state.AllocatedDevices.Insert(d.id)
	}
}

func (l *Ledger) remove(d allocatedDevice) {
	l.allocator = nil
	switch {
	case d.shared != nil:
		l.state.AllocatedSharedDeviceIDs.Delete(*d.shared)
		if d.consumed != nil {
			l.state.AggregatedCapacity.Remove(*d.consumed)
		}
	default:
		l.state.AllocatedDevices.Delete(d.id)
	}
}

// devicesOf are the devices an allocation takes, as the scheduler's
// allocated state counts them: admin access takes none; with consumable
// capacity a shared allocation takes its share and capacity, not the
// device.
func devicesOf(r resourceapi.AllocationResult, consumable bool) []allocatedDevice {
	var out []allocatedDevice
	for _, res := range r.Devices.Results {
		if ptr.Deref(res.AdminAccess, false) {
			continue
		}
		id := structured.MakeDeviceID(res.Driver, res.Pool, res.Device)
		d := allocatedDevice{id: id}
		if consumable && res.ShareID != nil {
			shared := structured.MakeSharedDeviceID(id, res.ShareID)
			d.shared = &shared
			if res.ConsumedCapacity != nil {
				consumed := structured.NewDeviceConsumedCapacity(id, res.ConsumedCapacity)
				d.consumed = &consumed
			}
		}
		out = append(out, d)
	}
	return out
}

// claimsFor are the claims the allocator must allocate for the pod on the
// node: its claims not allocated yet (as Demand read them), then, as
// DynamicResources does, one claim for the extended resources a
// DeviceClass serves on a node whose allocatable lacks them, an exact
// count of the class per resource.
func (l *Ledger) claimsFor(pod *corev1.Pod, node *corev1.Node) []*resourceapi.ResourceClaim {
	claims := l.c.claimsOf[pod.UID]
	var requests []resourceapi.DeviceRequest
	request := capacity.Request(pod)
	names := make([]corev1.ResourceName, 0, len(request))
	for name := range request {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	for _, name := range names {
		class, ok := l.c.v.classKeyed(name)
		if !ok || request[name] <= 0 {
			continue
		}
		if q, ok := node.Status.Allocatable[name]; ok && !q.IsZero() {
			continue // a device plugin serves it: NodeResourcesFit counts it
		}
		requests = append(requests, resourceapi.DeviceRequest{
			Name:    fmt.Sprintf("extended-%d", len(requests)),
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: class.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: request[name]},
		})
	}
	if len(requests) == 0 {
		return claims
	}
	extended := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "-extended-resources", UID: types.UID(string(pod.UID) + "/extended-resources")},
		Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}},
	}
	return append(append([]*resourceapi.ResourceClaim{}, claims...), extended)
}
