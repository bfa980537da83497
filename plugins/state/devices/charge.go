package devices

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Charge is what the pod's claims count for in its queue, per class key:
// an allocated claim the devices it was allocated (adminAccess ones
// excepted), a claim not allocated yet (or a template's, before the claim
// exists) an exact request its count, allocationMode All one device, a
// prioritized list its largest alternative, an adminAccess request
// nothing. Claims a class serves by extended resource are in the pod's
// requests, not its claims. Unlike Demand, a claim is charged whether or
// not it is allocated: it is what the pod holds, not what placing it
// takes. A claim several pods use is charged once (Pays): to the first pod
// its status.reservedFor lists. Errors (a claim, template or class
// missing) charge nothing for that claim.
func (v *View) Charge(pod *corev1.Pod) capacity.Resources {
	if len(pod.Spec.ResourceClaims) == 0 || v == nil || v.err != nil {
		return nil
	}
	charge := capacity.Resources{}
	for _, ref := range pod.Spec.ResourceClaims {
		claim, spec := v.claimOf(pod, ref)
		if spec == nil || (claim != nil && !Pays(pod, claim)) {
			continue
		}
		if claim != nil && claim.Status.Allocation != nil {
			v.chargeAllocation(charge, claim)
			continue
		}
		for _, req := range spec.Devices.Requests {
			v.chargeRequest(charge, req)
		}
	}
	return charge
}

// Pays reports whether the pod is the one a claim it uses is charged to:
// the first pod the claim's status.reservedFor lists, or, while it is
// reserved for none, every pod asking for it (whichever is scheduled first
// allocates it; until then each one's admission must count it).
func Pays(pod *corev1.Pod, claim *resourceapi.ResourceClaim) bool {
	for _, consumer := range claim.Status.ReservedFor {
		if consumer.APIGroup == "" && consumer.Resource == "pods" {
			return consumer.UID == pod.UID
		}
	}
	return true
}

// claimOf resolves a pod's claim reference to its claim (nil before it is
// generated from its template) and spec (nil when neither exists).
func (v *View) claimOf(pod *corev1.Pod, ref corev1.PodResourceClaim) (*resourceapi.ResourceClaim, *resourceapi.ResourceClaimSpec) {
	name := claimName(pod, ref)
	if name != "" {
		if claim, err := v.claimNamed(pod.Namespace, name); err == nil {
			return claim, &claim.Spec
		}
	}
	template := ptr.Deref(ref.ResourceClaimTemplateName, "")
	if template == "" {
		return nil, nil
	}
	t, err := v.templateNamed(pod.Namespace, template)
	if err != nil {
		return nil, nil
	}
	return nil, &t.Spec.Spec
}

// requestClass is the class of a claim's request by the name an
// allocation result gives it: "req", or "req/sub" for an alternative of a
// prioritized list.
func requestClass(spec *resourceapi.ResourceClaimSpec, name string) string {
	main, sub, _ := strings.Cut(name, "/")
	for _, req := range spec.Devices.Requests {
		if req.Name != main {
			continue
		}
		if req.Exactly != nil {
			return req.Exactly.DeviceClassName
		}
		for _, alt := range req.FirstAvailable {
			if alt.Name == sub {
				return alt.DeviceClassName
			}
		}
	}
	return ""
}

// chargeRequest charges a request of a claim not allocated yet.
func (v *View) chargeRequest(charge capacity.Resources, req resourceapi.DeviceRequest) {
	count := func(mode resourceapi.DeviceAllocationMode, n int64) int64 {
		if mode == resourceapi.DeviceAllocationModeAll {
			return 1
		}
		return max(n, 1)
	}
	if exact := req.Exactly; exact != nil {
		if class, ok := v.ClassNamed(exact.DeviceClassName); ok && !ptr.Deref(exact.AdminAccess, false) {
			charge[Key(class)] += count(exact.AllocationMode, exact.Count)
		}
		return
	}
	var largest int64
	var key corev1.ResourceName
	for _, alt := range req.FirstAvailable {
		class, ok := v.ClassNamed(alt.DeviceClassName)
		if n := count(alt.AllocationMode, alt.Count); ok && n > largest {
			largest, key = n, Key(class)
		}
	}
	if largest > 0 {
		charge[key] += largest
	}
}

// Held is what the pod's claims still hold once the pod is done: per
// claim still allocated that the pod Pays for (as namespace/name),
// including the one the scheduler made for its DRA-backed extended
// resources, its devices per class key. Devices are free when the
// resourceclaim controller deallocates a claim, not when its pod exits.
func (v *View) Held(pod *corev1.Pod) map[string]capacity.Resources {
	held := map[string]capacity.Resources{}
	v.eachHeld(pod, func(claim *resourceapi.ResourceClaim) bool { return Pays(pod, claim) }, func(key string, _ *resourceapi.ResourceClaim, devices capacity.Resources) {
		held[key] = devices
	})
	return held
}

// Released is what evicting the pod gives back once its claims are
// deallocated: the devices of its allocated claims whose every consumer
// (status.reservedFor) leaves too, and those claims (as namespace/name).
// A claim another pod keeps using stays allocated.
func (v *View) Released(pod *corev1.Pod, leaving func(types.UID) bool) (claims []string, released capacity.Resources) {
	return v.heldIf(pod, leavesWith(pod, leaving))
}

// ReleasedDevices is the devices Released counts, by ID, for an allocator
// to see free. A device allocated to be shared (a share of its consumable
// capacity) is left out: the allocator keeps counting it as used, which
// errs towards evicting nothing rather than evicting in vain. So is one
// allocated for admin access, which took no device.
func (v *View) ReleasedDevices(pod *corev1.Pod, leaving func(types.UID) bool) []structured.DeviceID {
	var ids []structured.DeviceID
	v.eachHeld(pod, leavesWith(pod, leaving), func(_ string, claim *resourceapi.ResourceClaim, _ capacity.Resources) {
		for _, result := range claim.Status.Allocation.Devices.Results {
			if result.ShareID == nil && !ptr.Deref(result.AdminAccess, false) {
				ids = append(ids, structured.MakeDeviceID(result.Driver, result.Pool, result.Device))
			}
		}
	})
	return ids
}

// leavesWith says whether a claim of the pod is deallocated when the pod
// and the pods leaving says leave: every consumer it is reserved for
// leaves.
func leavesWith(pod *corev1.Pod, leaving func(types.UID) bool) func(*resourceapi.ResourceClaim) bool {
	return func(claim *resourceapi.ResourceClaim) bool {
		for _, consumer := range claim.Status.ReservedFor {
			if consumer.UID != pod.UID && !leaving(consumer.UID) {
				return false
			}
		}
		return true
	}
}

// heldIf is the pod's allocated claims that keep says count, and their
// devices summed.
func (v *View) heldIf(pod *corev1.Pod, keep func(*resourceapi.ResourceClaim) bool) (claims []string, held capacity.Resources) {
	v.eachHeld(pod, keep, func(key string, _ *resourceapi.ResourceClaim, devices capacity.Resources) {
		claims = append(claims, key)
		if held == nil {
			held = capacity.Resources{}
		}
		held.Add(devices)
	})
	return claims, held
}

// eachHeld calls found with each of the pod's allocated claims that keep
// says count (as namespace/name, and the claim) and the devices it holds.
func (v *View) eachHeld(pod *corev1.Pod, keep func(*resourceapi.ResourceClaim) bool, found func(key string, claim *resourceapi.ResourceClaim, devices capacity.Resources)) {
	if v == nil || v.err != nil {
		return
	}
	names, _ := ClaimNames(pod)
	for _, name := range names {
		claim, err := v.claimNamed(pod.Namespace, name)
		if err != nil || claim.Status.Allocation == nil || !keep(claim) {
			continue
		}
		devices := capacity.Resources{}
		v.chargeAllocation(devices, claim)
		found(pod.Namespace+"/"+name, claim, devices)
	}
}

// chargeAllocation charges the devices an allocated claim holds, but
// those of adminAccess requests.
func (v *View) chargeAllocation(charge capacity.Resources, claim *resourceapi.ResourceClaim) {
	for _, result := range claim.Status.Allocation.Devices.Results {
		if class, ok := v.ClassNamed(requestClass(&claim.Spec, result.Request)); ok && !ptr.Deref(result.AdminAccess, false) {
			charge[Key(class)]++
		}
	}
}

// ClaimFreed reports whether a claim event (old and new objects as the
// informer gives them, nil where there is none) frees devices: an
// allocated claim deallocated or deleted.
func ClaimFreed(oldObj, newObj interface{}) bool {
	oldClaim, _ := oldObj.(*resourceapi.ResourceClaim)
	if oldClaim == nil || oldClaim.Status.Allocation == nil {
		return false
	}
	newClaim, _ := newObj.(*resourceapi.ResourceClaim)
	return newClaim == nil || newClaim.Status.Allocation == nil
}

// ClaimAllocated reports whether a claim update allocated it.
func ClaimAllocated(oldObj, newObj interface{}) bool {
	oldClaim, _ := oldObj.(*resourceapi.ResourceClaim)
	newClaim, _ := newObj.(*resourceapi.ResourceClaim)
	return oldClaim != nil && newClaim != nil && oldClaim.Status.Allocation == nil && newClaim.Status.Allocation != nil
}

// Asks names a DeviceClass whose devices the pods ask for (by claim, or
// by an extended resource the class serves), or "".
func (v *View) Asks(pods []*corev1.Pod) string {
	if v == nil {
		return ""
	}
	for _, pod := range pods {
		for _, ref := range pod.Spec.ResourceClaims {
			_, spec := v.claimOf(pod, ref)
			if spec == nil {
				continue
			}
			for _, req := range spec.Devices.Requests {
				if req.Exactly != nil {
					return req.Exactly.DeviceClassName
				}
				if len(req.FirstAvailable) > 0 {
					return req.FirstAvailable[0].DeviceClassName
				}
			}
		}
		if keys := v.Keys(capacity.Request(pod)); len(keys) > 0 {
			return v.ClassOf(keys[0])
		}
	}
	return ""
}

// NodeOfAllocation is the one node an allocation's devices are on, by its
// node selector (a field match on metadata.name, as the allocator writes
// it for node-local devices); "" when it names none or several.
func NodeOfAllocation(alloc *resourceapi.AllocationResult) string {
	if alloc == nil || alloc.NodeSelector == nil || len(alloc.NodeSelector.NodeSelectorTerms) != 1 {
		return ""
	}
	for _, field := range alloc.NodeSelector.NodeSelectorTerms[0].MatchFields {
		if field.Key == "metadata.name" && field.Operator == corev1.NodeSelectorOpIn && len(field.Values) == 1 {
			return field.Values[0]
		}
	}
	return ""
}
