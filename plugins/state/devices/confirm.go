package devices

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// A count of free devices per class is exact for the usual claim (n whole
// devices of a class) on the usual node (whole devices). It over-counts
// where the allocator has more to satisfy than a class: a request's own
// selectors, constraints between a claim's devices (matchAttribute,
// distinctAttribute), consumable capacity, allocationMode All, a
// prioritized list; and devices that share counters (partitions of one
// GPU) or capacity. Where either is present, the structured allocator
// itself — the one the DynamicResources plugin runs in Filter, built with
// the scheduler's features over the same allocated state — confirms how
// many of the check's pods it can allocate together on a node, and the
// node's free count is lowered to what those pods take. A gang then waits
// with nothing bound instead of planning members onto nodes whose Filter
// refuses them attempt after attempt.

// toAllocate records a claim the pod still needs allocated: the claim, or
// one as its template will make it.
func (c *Catalog) toAllocate(pod *corev1.Pod, ref corev1.PodResourceClaim, claim *resourceapi.ResourceClaim, spec *resourceapi.ResourceClaimSpec) {
	c.claimsOf[pod.UID] = append(c.claimsOf[pod.UID], claimToAllocate(pod, ref, claim, spec))
	if beyondCount(spec) {
		c.beyondCounts = true
	}
}

// claimToAllocate is the claim, or before it exists one as its template
// will make it.
func claimToAllocate(pod *corev1.Pod, ref corev1.PodResourceClaim, claim *resourceapi.ResourceClaim, spec *resourceapi.ResourceClaimSpec) *resourceapi.ResourceClaim {
	if claim != nil {
		return claim
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "-" + ref.Name, UID: types.UID(string(pod.UID) + "/" + ref.Name)},
		Spec:       *spec,
	}
}

// Hold makes the allocator see, on each node, the claims still to be
// allocated of the pods other placing gangs are planned to place there
// (state.Locked.PlannedPods) as allocated before it judges the check's
// pods: the counts already leave the devices those plans hold aside
// (capacity.FreeView's held), and where a count cannot judge the claims
// neither can it judge which devices the plans will take. Call it before
// any fit reads the catalog.
func (c *Catalog) Hold(planned map[string][]*corev1.Pod) error {
	if len(planned) == 0 || c.r == nil || c.r.dra == nil {
		return nil
	}
	if err := c.loadClasses(); err != nil {
		return err
	}
	c.heldClaims, c.heldDemand = map[string][]*resourceapi.ResourceClaim{}, map[string]capacity.Resources{}
	for node, pods := range planned {
		demand := capacity.Resources{}
		for _, pod := range pods {
			for _, ref := range pod.Spec.ResourceClaims {
				claim, spec, err := c.resolve(pod, ref, claimName(pod, ref))
				if err != nil {
					return err
				}
				if spec == nil {
					continue
				}
				for _, req := range spec.Devices.Requests {
					if _, err := c.countRequest(demand, req); err != nil {
						return err
					}
				}
				c.heldClaims[node] = append(c.heldClaims[node], claimToAllocate(pod, ref, claim, spec))
				if beyondCount(spec) {
					c.beyondCounts = true
				}
			}
		}
		c.heldDemand[node] = demand
	}
	return nil
}

// beyondCount reports whether a claim asks for more than n devices of a
// class, which a count cannot judge.
func beyondCount(spec *resourceapi.ResourceClaimSpec) bool {
	if len(spec.Devices.Constraints) > 0 {
		return true
	}
	for _, req := range spec.Devices.Requests {
		if len(req.FirstAvailable) > 0 {
			return true
		}
		if e := req.Exactly; e != nil && (len(e.Selectors) > 0 || e.Capacity != nil || e.AllocationMode == resourceapi.DeviceAllocationModeAll) {
			return true
		}
	}
	return false
}

// FreeFor is FreeOn for pods, in the order a fit places them, whose
// Demand the check has read: where the count may over-count for them (see
// above), each class's free count on the node is lowered to what the
// longest run of them the allocator can allocate together there takes.
func (c *Catalog) FreeFor(ctx context.Context, node *corev1.Node, keys []corev1.ResourceName, pods []*corev1.Pod) (capacity.Resources, error) {
	counts, err := c.CountOn(ctx, node, keys)
	if err != nil || !c.NeedsAllocator(node.Name) {
		return counts.Free, err
	}
	// The pods the count lets onto the node bound what the allocator can
	// do there: a node full by count needs no allocator. Devices other
	// gangs' plans hold are not free for them (the caller's view takes
	// them off the count).
	held := c.heldDemand[node.Name]
	left := counts.Free.Clone()
	left.Sub(held)
	most := 0
	for _, pod := range pods {
		demand := c.demandOf[pod.UID]
		if !within(demand, left) {
			break
		}
		left.Sub(demand)
		most++
	}
	n, err := c.allocatableTogether(ctx, node, pods[:most])
	if err != nil {
		return nil, err
	}
	if n == most {
		return counts.Free, nil
	}
	free := held.Clone()
	if free == nil {
		free = capacity.Resources{}
	}
	for _, pod := range pods[:n] {
		free.Add(c.demandOf[pod.UID])
	}
	for key, v := range counts.Free {
		if free[key] < v {
			c.capped = true
		}
		free[key] = min(free[key], v)
	}
	return free, nil
}

// NeedsAllocator reports whether a count of the node's free devices may
// over-count for the pods whose Demand the catalog read (see above), once
// CountOn has read the node: a plan placing them there is then confirmed
// with AllocatableOn.
func (c *Catalog) NeedsAllocator(node string) bool {
	return c.beyondCounts || c.partitioned[node]
}

// AllocatableOn reports whether the allocator can allocate the claims of
// pods (whose Demand the catalog read) together on the node, were the
// freed devices no longer allocated: the state a preemption's victims
// leave once their claims are deallocated.
func (c *Catalog) AllocatableOn(ctx context.Context, node *corev1.Node, pods []*corev1.Pod, freed []structured.DeviceID) (bool, error) {
	var claims []*resourceapi.ResourceClaim
	for _, pod := range pods {
		claims = append(claims, c.claimsOf[pod.UID]...)
	}
	if len(claims) == 0 {
		return true, nil
	}
	allocator, err := c.allocatorFor(ctx)
	if err != nil {
		return false, err
	}
	if len(freed) > 0 && c.allocated != nil {
		state := *c.allocated
		state.AllocatedDevices = c.allocated.AllocatedDevices.Clone().Delete(freed...)
		if allocator, err = structured.NewAllocator(ctx, c.r.features, state, c.r.dra.DeviceClasses(), c.slices, c.r.cel); err != nil {
			return false, err
		}
	}
	result, err := allocator.Allocate(ctx, node, claims)
	if err != nil {
		return false, fmt.Errorf("allocating on node %s: %w", node.Name, err)
	}
	return result != nil, nil
}

// Capped reports whether the allocator allowed fewer devices on some node
// than the count: a message saying how many devices are free should say
// that not all of them can serve these claims.
func (c *Catalog) Capped() bool { return c.capped }

func within(demand, free capacity.Resources) bool {
	for key, v := range demand {
		if v > free[key] {
			return false
		}
	}
	return true
}

// allocatableTogether is how many of the pods, from the first, the
// allocator can allocate the claims of together on the node, with the
// claims other gangs' plans hold there (see Hold). It assumes
// that a run which cannot be allocated does not become allocatable with
// more pods, and searches by halves.
func (c *Catalog) allocatableTogether(ctx context.Context, node *corev1.Node, pods []*corev1.Pod) (int, error) {
	if len(pods) == 0 {
		return 0, nil
	}
	allocator, err := c.allocatorFor(ctx)
	if err != nil {
		return 0, err
	}
	fits := func(n int) (bool, error) {
		claims := slices.Clone(c.heldClaims[node.Name])
		for _, pod := range pods[:n] {
			claims = append(claims, c.claimsOf[pod.UID]...)
		}
		if len(claims) == 0 {
			return true, nil
		}
		result, err := allocator.Allocate(ctx, node, claims)
		if err != nil {
			return false, fmt.Errorf("allocating on node %s: %w", node.Name, err)
		}
		return result != nil, nil
	}
	if ok, err := fits(len(pods)); ok || err != nil {
		return len(pods), err
	}
	low, high := 0, len(pods) // fits(low), !fits(high)
	for high-low > 1 {
		mid := (low + high) / 2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			low = mid
		} else {
			high = mid
		}
	}
	return low, nil
}

// allocatorFor builds the check's allocator once, over the state the
// counts read.
func (c *Catalog) allocatorFor(ctx context.Context) (structured.Allocator, error) {
	if c.allocator != nil || c.allocatorErr != nil {
		return c.allocator, c.allocatorErr
	}
	if err := c.load(); err != nil {
		return nil, err
	}
	state := structured.AllocatedState{}
	if c.allocated != nil {
		state = *c.allocated
	}
	c.allocator, c.allocatorErr = structured.NewAllocator(ctx, c.r.features, state, c.r.dra.DeviceClasses(), c.slices, c.r.cel)
	return c.allocator, c.allocatorErr
}
