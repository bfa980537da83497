package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BinpackArgs configures the Binpack score plugin.
//
// +kubebuilder:object:root=true
type BinpackArgs struct {
	metav1.TypeMeta `json:",inline"`

	// Resources that count towards the packing score, with their weights.
	// Default: cpu 1, memory 1. A resource that is not listed is ignored.
	Resources []ResourceWeight `json:"resources,omitempty"`
	// ScarceResources are resources whose nodes pods that do not request them
	// should avoid. Default: [nvidia.com/gpu]. An explicit empty list turns
	// the protection off.
	ScarceResources []corev1.ResourceName `json:"scarceResources,omitempty"`
}

// ResourceWeight is one resource's share of a score.
type ResourceWeight struct {
	// Name of the resource, e.g. cpu, memory or nvidia.com/gpu.
	Name corev1.ResourceName `json:"name"`
	// Weight of the resource, 0..100. Default 1. 0 ignores the resource.
	Weight *int64 `json:"weight,omitempty"`
}
