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
	// DeviceClasses scores the devices DRA DeviceClasses serve, each class's
	// under its resource name (its extendedResourceName, else
	// deviceclass.resource.kubernetes.io/<class>), without listing every
	// class here. Default: weight 4, scarce true.
	DeviceClasses *DeviceClassScoring `json:"deviceClasses,omitempty"`
}

// DeviceClassScoring is how Binpack counts every DeviceClass's devices.
type DeviceClassScoring struct {
	// Weight of a class's devices in the packing score, 0..100, unless
	// resources names the class's resource. Default 4 (as the shipped
	// profile weighs nvidia.com/gpu); 0 leaves them out of the score.
	Weight *int64 `json:"weight,omitempty"`
	// Scarce keeps pods that do not ask for a class's devices off the nodes
	// with such devices free, as scarceResources does for the resources it
	// names. Default true.
	Scarce *bool `json:"scarce,omitempty"`
}

// ResourceWeight is one resource's share of a score.
type ResourceWeight struct {
	// Name of the resource, e.g. cpu, memory or nvidia.com/gpu.
	Name corev1.ResourceName `json:"name"`
	// Weight of the resource, 0..100. Default 1. 0 ignores the resource.
	Weight *int64 `json:"weight,omitempty"`
}

// GangArgs configures the Gang plugin.
//
// +kubebuilder:object:root=true
type GangArgs struct {
	metav1.TypeMeta `json:",inline"`

	// PermitWaitingTimeSeconds is how long placed members wait for the rest
	// of their gang when the PodGroup sets no scheduleTimeoutSeconds.
	// Default 60; must be > 0.
	PermitWaitingTimeSeconds *int64 `json:"permitWaitingTimeSeconds,omitempty"`
	// BackoffSeconds keeps a gang whose attempt failed from starting a new
	// one for this long, so that other gangs get their turn. Default 10;
	// 0 turns back-off off.
	BackoffSeconds *int64 `json:"backoffSeconds,omitempty"`
	// TopologyLevels are the cluster's topology node label keys from the
	// widest to the narrowest, e.g. [topology.kubernetes.io/zone,
	// example.com/rack, nvidia.com/gpu.clique, kubernetes.io/hostname]. A
	// PodGroup annotated scheduling.flotilla.dev/topology-preferred with one
	// of them falls back level by level to the wider ones. Default empty:
	// required placement still works with any label key.
	TopologyLevels []string `json:"topologyLevels,omitempty"`
	// MaxMembersInFlight paces gangs by the binding backlog: no gang starts
	// an attempt while this many members of gangs are placed and not yet
	// bound (waiting in Permit for their siblings, or binding). Gangs
	// already placing go on, and a gang larger than the limit still starts
	// when fewer are in flight. Every member past its scheduling cycle
	// holds that cycle's state (with DRA, an allocator's snapshot) until it
	// is bound: the limit keeps the scheduler from placing faster than the
	// apiserver takes the bindings and claim writes. Default 96; 0 turns
	// the limit off.
	MaxMembersInFlight *int64 `json:"maxMembersInFlight,omitempty"`
}

// ProportionArgs configures the Proportion plugin.
//
// +kubebuilder:object:root=true
type ProportionArgs struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultQueue takes the pods that name no queue by their own, their
	// PodGroup's or their namespace's scheduling.flotilla.dev/queue label.
	// Default "default"; if no such Queue exists it acts as weight 1 with no
	// limits.
	DefaultQueue *string `json:"defaultQueue,omitempty"`
}
