package capacity

import (
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"
)

// Resources is an amount per resource: cpu in millicores, everything else
// in its base unit. A resource that is absent is zero.
type Resources map[corev1.ResourceName]int64

// ResourcesOf converts a ResourceList.
func ResourcesOf(list corev1.ResourceList) Resources {
	r := make(Resources, len(list))
	for name, q := range list {
		r[name] = amountOf(name, q)
	}
	return r
}

// List converts back to a ResourceList, dropping zeros.
func (r Resources) List() corev1.ResourceList {
	list := corev1.ResourceList{}
	for name, v := range r {
		if v == 0 {
			continue
		}
		list[name] = QuantityOf(name, v)
	}
	return list
}

// Add adds o to r.
func (r Resources) Add(o Resources) {
	for name, v := range o {
		r[name] += v
	}
}

// Sub subtracts o from r.
func (r Resources) Sub(o Resources) {
	for name, v := range o {
		r[name] -= v
	}
}

// Plus is a copy of r with o added; r is left as it was.
func (r Resources) Plus(o Resources) Resources {
	sum := r.Clone()
	sum.Add(o)
	return sum
}

// Clone copies r.
func (r Resources) Clone() Resources {
	c := make(Resources, len(r))
	for k, v := range r {
		c[k] = v
	}
	return c
}

// Less orders requests by size: cpu, then memory, then everything else.
func (r Resources) Less(o Resources) bool {
	if r[corev1.ResourceCPU] != o[corev1.ResourceCPU] {
		return r[corev1.ResourceCPU] < o[corev1.ResourceCPU]
	}
	if r[corev1.ResourceMemory] != o[corev1.ResourceMemory] {
		return r[corev1.ResourceMemory] < o[corev1.ResourceMemory]
	}
	var rest, orest int64
	for name, v := range r {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			rest += v
		}
	}
	for name, v := range o {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			orest += v
		}
	}
	return rest < orest
}

// Equal reports whether r and o hold the same amounts (an absent resource
// and an explicit zero differ).
func (r Resources) Equal(o Resources) bool {
	if len(r) != len(o) {
		return false
	}
	for k, v := range r {
		if ov, ok := o[k]; !ok || ov != v {
			return false
		}
	}
	return true
}

// Request is what a pod asks for: what it counts for in its queue and what
// a first fit places.
func Request(pod *corev1.Pod) Resources {
	return ResourcesOf(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
}

// FreeOf is what a node has left: allocatable less what its pods (bound
// and assumed) request, pod slots included.
func FreeOf(n fwk.NodeInfo) Resources {
	free := Resources{
		corev1.ResourceCPU:              FreeAmount(n, corev1.ResourceCPU),
		corev1.ResourceMemory:           FreeAmount(n, corev1.ResourceMemory),
		corev1.ResourceEphemeralStorage: FreeAmount(n, corev1.ResourceEphemeralStorage),
		corev1.ResourcePods:             FreeAmount(n, corev1.ResourcePods),
	}
	for name := range n.GetAllocatable().GetScalarResources() {
		free[name] = FreeAmount(n, name)
	}
	return free
}

// FreeWithDevices is what a node has left, as FreeOf counts it, with the
// DRA devices free on it (per class key) in place of allocatable less
// requested under each key the node does not have in allocatable: DRA
// devices are not in allocatable, and a pod asking for them by extended
// resource is in the node's requested although its devices count as
// allocated already. Under a key the node has in allocatable, a device
// plugin serves it, as the scheduler's NodeResourcesFit decides.
func FreeWithDevices(n fwk.NodeInfo, devices Resources) Resources {
	free := FreeOf(n)
	for key, count := range devices {
		if AllocatableAmount(n, key) == 0 {
			free[key] = count
		}
	}
	return free
}

// FreeAmount is what a node has left of one resource, as FreeOf counts it,
// without building the whole map: for checks that read one resource of
// many nodes.
func FreeAmount(n fwk.NodeInfo, name corev1.ResourceName) int64 {
	if name == corev1.ResourcePods {
		return int64(n.GetAllocatable().GetAllowedPodNumber() - len(n.GetPods()))
	}
	return Amount(n.GetAllocatable(), name) - Amount(n.GetRequested(), name)
}

// AllocatableAmount is a node's allocatable of one resource.
func AllocatableAmount(n fwk.NodeInfo, name corev1.ResourceName) int64 {
	return Amount(n.GetAllocatable(), name)
}

// Amount reads one resource of a framework Resource, in Resources' units.
func Amount(r fwk.Resource, name corev1.ResourceName) int64 {
	switch name {
	case corev1.ResourceCPU:
		return r.GetMilliCPU()
	case corev1.ResourceMemory:
		return r.GetMemory()
	case corev1.ResourceEphemeralStorage:
		return r.GetEphemeralStorage()
	case corev1.ResourcePods:
		return int64(r.GetAllowedPodNumber())
	}
	return r.GetScalarResources()[name]
}

// Occupied is what a pod on a node takes from it, as the node's own
// accounting counts it: read from the pod info the scheduler's snapshot
// computed when it added the pod to the node, not computed again from the
// pod's containers. For victims and terminating pods, whose room is
// counted for every node a preemption tries, that is the difference
// between reading a cache and aggregating every container's requests.
func Occupied(info fwk.PodInfo) Resources {
	r := info.CalculateResource().Resource
	out := Resources{corev1.ResourceCPU: r.GetMilliCPU(), corev1.ResourceMemory: r.GetMemory()}
	if e := r.GetEphemeralStorage(); e != 0 {
		out[corev1.ResourceEphemeralStorage] = e
	}
	for name, v := range r.GetScalarResources() {
		out[name] = v
	}
	return out
}

// FitsIn reports whether a pod requesting r fits in free; the pod also
// takes a pod slot.
func (r Resources) FitsIn(free Resources) bool {
	if free[corev1.ResourcePods] < 1 {
		return false
	}
	for name, v := range r {
		if v > 0 && free[name] < v {
			return false
		}
	}
	return true
}

// FitsOn reports whether a pod requesting r fits on the node as it is,
// as FitsIn(FreeOf(n)) does, without building the node's free capacity.
func (r Resources) FitsOn(n fwk.NodeInfo) bool {
	if FreeAmount(n, corev1.ResourcePods) < 1 {
		return false
	}
	for name, v := range r {
		if v > 0 && FreeAmount(n, name) < v {
			return false
		}
	}
	return true
}

// Take removes a pod requesting r from free.
func (r Resources) Take(free Resources) {
	free.Sub(r)
	free[corev1.ResourcePods]--
}
