package devices

import (
	"context"
	"fmt"

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
// prioritized list; devices that share counters (partitions of one GPU)
// or capacity; and two classes matching the same devices. Gang's plans
// confirm every member with the allocator (ledger.go); preemption's
// simulation confirms its plans where a count may over-count
// (NeedsAllocator, AllocatableOn).

// toAllocate records a claim the pod still needs allocated: the claim, or
// one as its template will make it.
func (c *Catalog) toAllocate(pod *corev1.Pod, ref corev1.PodResourceClaim, claim *resourceapi.ResourceClaim, spec *resourceapi.ResourceClaimSpec) {
	c.claimsOf[pod.UID] = append(c.claimsOf[pod.UID], claimToAllocate(pod, ref, claim, spec))
	if beyondCount(spec) {
		c.beyondCounts = true
	}
}

// Allocates reports whether a pod Demand read has claims not allocated
// yet: some, like a prioritized list over two classes, count nothing, and
// only the allocator judges them.
func (c *Catalog) Allocates() bool {
	for _, claims := range c.claimsOf {
		if len(claims) > 0 {
			return true
		}
	}
	return false
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
	if len(planned) == 0 || c.v == nil {
		return nil
	}
	if err := c.v.Err(); err != nil {
		return err
	}
	c.heldClaims = map[string][]*resourceapi.ResourceClaim{}
	for node, pods := range planned {
		demand := capacity.Resources{}
		for _, pod := range pods {
			for _, ref := range pod.Spec.ResourceClaims {
				claim, spec, err := c.v.resolve(pod, ref, claimName(pod, ref))
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
	if len(freed) > 0 && c.v.allocated != nil {
		state := *c.v.allocated
		state.AllocatedDevices = c.v.allocated.AllocatedDevices.Clone().Delete(freed...)
		if allocator, err = newAllocator(ctx, c.v, state); err != nil {
			return false, err
		}
	}
	result, err := allocator.Allocate(ctx, node, claims)
	if err != nil {
		return false, fmt.Errorf("allocating on node %s: %w", node.Name, err)
	}
	return result != nil, nil
}

// allocatorFor builds the check's allocator once, over the state the
// counts read.
func (c *Catalog) allocatorFor(ctx context.Context) (structured.Allocator, error) {
	if c.allocator != nil || c.allocatorErr != nil {
		return c.allocator, c.allocatorErr
	}
	if err := c.v.Err(); err != nil {
		return nil, err
	}
	state := structured.AllocatedState{}
	if c.v.allocated != nil {
		state = *c.v.allocated
	}
	c.allocator, c.allocatorErr = newAllocator(ctx, c.v, state)
	return c.allocator, c.allocatorErr
}
