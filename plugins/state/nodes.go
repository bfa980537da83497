package state

import (
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

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
