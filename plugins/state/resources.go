package state

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	fwk "k8s.io/kube-scheduler/framework"
)

// Resources is an amount per resource: cpu in millicores, everything else
// in its base unit. A resource that is absent is zero.
type Resources map[corev1.ResourceName]int64

// ResourcesOf converts a ResourceList.
func ResourcesOf(list corev1.ResourceList) Resources {
	r := make(Resources, len(list))
	for name, q := range list {
		if name == corev1.ResourceCPU {
			r[name] = q.MilliValue()
		} else {
			r[name] = q.Value()
		}
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
		if name == corev1.ResourceCPU {
			list[name] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		} else if name == corev1.ResourceMemory {
			list[name] = *resource.NewQuantity(v, resource.BinarySI)
		} else {
			list[name] = *resource.NewQuantity(v, resource.DecimalSI)
		}
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

func equalResources(a, b Resources) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// FreeOf is what a node has left: allocatable less what its pods (bound
// and assumed) request, pod slots included.
func FreeOf(n fwk.NodeInfo) Resources {
	alloc, used := n.GetAllocatable(), n.GetRequested()
	free := Resources{
		corev1.ResourceCPU:              alloc.GetMilliCPU() - used.GetMilliCPU(),
		corev1.ResourceMemory:           alloc.GetMemory() - used.GetMemory(),
		corev1.ResourceEphemeralStorage: alloc.GetEphemeralStorage() - used.GetEphemeralStorage(),
		corev1.ResourcePods:             int64(alloc.GetAllowedPodNumber() - len(n.GetPods())),
	}
	for name, v := range alloc.GetScalarResources() {
		free[name] = v - used.GetScalarResources()[name]
	}
	return free
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

// Take removes a pod requesting r from free.
func (r Resources) Take(free Resources) {
	free.Sub(r)
	free[corev1.ResourcePods]--
}
