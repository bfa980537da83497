package devices

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Demand is what the pod's claims not allocated yet will take, per class
// key, counting a claim only for the first pod of the check that
// references it; asked again for the same pod, it answers the same. An error names what is missing: a claim template or a
// device class that does not exist.
func (c *Catalog) Demand(pod *corev1.Pod) (capacity.Resources, error) {
	if len(pod.Spec.ResourceClaims) == 0 || c.v == nil {
		return nil, nil
	}
	if demand, ok := c.demandOf[pod.UID]; ok && pod.UID != "" {
		// Read already: its claims are recorded once.
		return demand, nil
	}
	if err := c.v.Err(); err != nil {
		return nil, err
	}
	demand := capacity.Resources{}
	for _, ref := range pod.Spec.ResourceClaims {
		claim, spec, err := c.claimSpec(pod, ref)
		if err != nil {
			return nil, err
		}
		if spec == nil {
			continue
		}
		for _, req := range spec.Devices.Requests {
			if err := c.addRequest(demand, req); err != nil {
				return nil, fmt.Errorf("pod %s/%s, claim %s: %w", pod.Namespace, pod.Name, ref.Name, err)
			}
		}
		c.toAllocate(pod, ref, claim, spec)
	}
	c.demandOf[pod.UID] = demand
	return demand, nil
}

// claimSpec is the claim the pod's reference resolves to (nil before it
// is generated from its template) and its spec, or nil when it takes
// nothing more: allocated already, or counted for another pod of this
// check.
func (c *Catalog) claimSpec(pod *corev1.Pod, ref corev1.PodResourceClaim) (*resourceapi.ResourceClaim, *resourceapi.ResourceClaimSpec, error) {
	name := claimName(pod, ref)
	if name == "" {
		return c.v.resolve(pod, ref, name)
	}
	id := pod.Namespace + "/" + name
	if c.seen[id] {
		if users, ok := c.unallocatedUsers[id]; ok {
			c.unallocatedUsers[id] = append(users, pod.Name)
		}
		return nil, nil, nil
	}
	c.seen[id] = true
	claim, spec, err := c.v.resolve(pod, ref, name)
	if claim != nil && spec != nil {
		c.unallocatedUsers[id] = []string{pod.Name}
	}
	return claim, spec, err
}

// resolve is claimSpec without the check's bookkeeping: the claim named
// name (the pod's generated or own claim; "" before it is generated),
// nil with its template's spec before it exists, or nil when allocated.
func (v *View) resolve(pod *corev1.Pod, ref corev1.PodResourceClaim, name string) (*resourceapi.ResourceClaim, *resourceapi.ResourceClaimSpec, error) {
	if name != "" {
		claim, err := v.claimNamed(pod.Namespace, name)
		if err == nil {
			if claim.Status.Allocation != nil {
				return nil, nil, nil
			}
			return claim, &claim.Spec, nil
		}
		if !apierrors.IsNotFound(err) || ref.ResourceClaimTemplateName == nil {
			return nil, nil, fmt.Errorf("pod %s/%s: ResourceClaim %s: %w", pod.Namespace, pod.Name, name, err)
		}
	}
	template := ptr.Deref(ref.ResourceClaimTemplateName, "")
	if template == "" {
		return nil, nil, fmt.Errorf("pod %s/%s: resourceClaims[%s] names neither a claim nor a template", pod.Namespace, pod.Name, ref.Name)
	}
	// Each pod gets its own claim from a template: never shared.
	t, err := v.templateNamed(pod.Namespace, template)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s: ResourceClaimTemplate %s/%s: %w", pod.Namespace, pod.Name, pod.Namespace, template, err)
	}
	return nil, &t.Spec.Spec, nil
}

// SharedUnallocated names a claim (namespace/name) that two or more pods
// of the check reference while it is not allocated, and those pods; ""
// if none. The scheduler allocates a claim for one pod at a time and
// refuses every other pod of the claim while that allocation is in
// flight, which lasts until the first pod binds: when the pods are
// members of one gang that must be placed together, the first waits in
// Permit for the others and the others wait for it, until the gang times
// out, again and again.
func (c *Catalog) SharedUnallocated() (claim string, pods []string) {
	for id, users := range c.unallocatedUsers {
		if len(users) > 1 && (claim == "" || id < claim) {
			claim, pods = id, users
		}
	}
	return claim, pods
}

// Uses reports whether one of the pod's claim references resolves to
// claim: by name, by the pod's status for a claim generated from a
// template, or, before the status records it, by the claim's controller
// being the pod.
func Uses(pod *corev1.Pod, claim *resourceapi.ResourceClaim) bool {
	if claim.Namespace != pod.Namespace {
		return false
	}
	for _, ref := range pod.Spec.ResourceClaims {
		if claimName(pod, ref) == claim.Name {
			return true
		}
	}
	owner := metav1.GetControllerOf(claim)
	return len(pod.Spec.ResourceClaims) > 0 && owner != nil && owner.UID == pod.UID
}

// claimName is the name of the claim a pod's reference resolves to: the
// claim it names, or the one generated from its template (as the pod's
// status records it); "" before that claim exists.
func claimName(pod *corev1.Pod, ref corev1.PodResourceClaim) string {
	if name := ptr.Deref(ref.ResourceClaimName, ""); name != "" {
		return name
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == ref.Name {
			return ptr.Deref(st.ResourceClaimName, "")
		}
	}
	return ""
}

// addRequest charges one device request of a claim, and makes the
// node counts honour its tolerations.
func (c *Catalog) addRequest(demand capacity.Resources, req resourceapi.DeviceRequest) error {
	exact, err := c.countRequest(demand, req)
	if exact != nil {
		class, _ := c.v.ClassNamed(exact.DeviceClassName)
		key := Key(class)
		c.tolerations[key] = append(c.tolerations[key], exact.Tolerations...)
	}
	return err
}

// countRequest adds what one device request of a claim takes to demand,
// and returns the request it counted (nil: nothing).
func (c *Catalog) countRequest(demand capacity.Resources, req resourceapi.DeviceRequest) (*resourceapi.ExactDeviceRequest, error) {
	exact := req.Exactly
	if exact == nil && len(req.FirstAvailable) > 0 {
		var err error
		if exact, err = c.leastAlternative(req.FirstAvailable); exact == nil || err != nil {
			return nil, err
		}
	}
	if exact == nil {
		return nil, nil
	}
	class, ok := c.v.ClassNamed(exact.DeviceClassName)
	if !ok {
		return nil, fmt.Errorf("DeviceClass %s not found", exact.DeviceClassName)
	}
	if ptr.Deref(exact.AdminAccess, false) {
		return nil, nil
	}
	count := int64(1)
	if exact.AllocationMode == resourceapi.DeviceAllocationModeExactCount || exact.AllocationMode == "" {
		count = max(exact.Count, 1)
	}
	demand[Key(class)] += count
	return exact, nil
}

// leastAlternative is what a prioritized list takes at least, as one
// request for the count: the allocator tries the alternatives in order on
// each node, so a count must not rule a node out that a later, smaller
// or other-class alternative fits. When every alternative is of one class
// key, that is the fewest devices any of them takes, tolerating what any
// of them tolerates; when they differ in class, nothing is counted (nil)
// and the allocator, member by member, decides alone. An alternative of
// adminAccess or allocationMode All counts as one device.
func (c *Catalog) leastAlternative(alternatives []resourceapi.DeviceSubRequest) (*resourceapi.ExactDeviceRequest, error) {
	var least *resourceapi.ExactDeviceRequest
	var key corev1.ResourceName
	for _, sub := range alternatives {
		class, ok := c.v.ClassNamed(sub.DeviceClassName)
		if !ok {
			return nil, fmt.Errorf("DeviceClass %s not found", sub.DeviceClassName)
		}
		count := int64(1)
		if sub.AllocationMode == resourceapi.DeviceAllocationModeExactCount || sub.AllocationMode == "" {
			count = max(sub.Count, 1)
		}
		if least == nil {
			least, key = &resourceapi.ExactDeviceRequest{DeviceClassName: sub.DeviceClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}, Key(class)
		} else if Key(class) != key {
			return nil, nil
		}
		least.Count = min(least.Count, count)
		least.Tolerations = append(least.Tolerations, sub.Tolerations...)
	}
	return least, nil
}
