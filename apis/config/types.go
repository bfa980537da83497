package config

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BinpackArgs configures the Binpack score plugin.
//
// +kubebuilder:object:root=true
type BinpackArgs struct {
	metav1.TypeMeta

	// Resources are the resources that count towards the packing score and
	// how much each counts. A resource that is not listed is ignored.
	Resources []ResourceWeight
	// ScarceResources are resources (typically accelerators) whose nodes a
	// pod that does not request them should avoid, so that those nodes stay
	// free for the pods that need them.
	ScarceResources []corev1.ResourceName
	// DeviceClasses scores every DRA DeviceClass's devices, under the
	// class's resource name, unless Resources or ScarceResources name it.
	DeviceClasses DeviceClassScoring
}

// DeviceClassScoring is how Binpack counts every DeviceClass's devices.
type DeviceClassScoring struct {
	// Weight of a class's devices in the packing score; 0: not scored.
	Weight int64
	// Scarce: a class's devices are protected as ScarceResources are.
	Scarce bool
}

// ResourceWeight is one resource's share of a score.
type ResourceWeight struct {
	Name   corev1.ResourceName
	Weight int64
}

// GangArgs configures the Gang plugin.
//
// +kubebuilder:object:root=true
type GangArgs struct {
	metav1.TypeMeta

	// PermitWaitingTimeSeconds is how long placed members wait in Permit for
	// the rest of their gang when the PodGroup sets no
	// scheduleTimeoutSeconds.
	PermitWaitingTimeSeconds int64
	// BackoffSeconds is how long a gang whose attempt failed is kept from
	// starting a new one, so that other gangs get their turn.
	BackoffSeconds int64
	// TopologyLevels are the cluster's topology node labels from the widest
	// to the narrowest (zone, rack, NVLink domain, host): a gang that
	// prefers one level falls back to the next wider one.
	TopologyLevels []string
	// MaxMembersInFlight paces gangs by the binding backlog: no gang starts
	// an attempt while this many members of gangs are placed and not yet
	// bound (waiting in Permit for their siblings, or binding). 0: no limit.
	MaxMembersInFlight int64
	// Reservation holds room for a gang that cannot be placed now.
	Reservation ReservationArgs
}

// ReservationArgs configures how gangs hold room (plugins/state/reservations).
type ReservationArgs struct {
	// MaxGangs is how many gangs may hold room at once; 0 turns
	// reservation off.
	MaxGangs int32
	// AfterSeconds is how long a gang waits, from its PodGroup's creation,
	// before it holds room.
	AfterSeconds int64
	// MaxClusterPercent is the most of the cluster's allocatable, of any
	// resource, that one reservation may hold.
	MaxClusterPercent int32
}

// ProportionArgs configures the Proportion plugin.
//
// +kubebuilder:object:root=true
type ProportionArgs struct {
	metav1.TypeMeta

	// DefaultQueue takes the pods that name no queue (by their own,
	// their PodGroup's or their namespace's label).
	DefaultQueue string
	// UsageHalfLife is the half-life of each queue's decayed usage; 0
	// turns usage off (shares are what queues hold now, as without it).
	UsageHalfLife metav1.Duration
	// UsageWeight is how strongly past use bends the shares (k in
	// plugins/state/fairshare: a queue that used its pool alone weighs
	// 2^(−2k) of a newcomer).
	UsageWeight float64
	// UsageStatusInterval is how often the leader persists each queue's
	// usage to its status, for a restart or a new leader to seed from.
	UsageStatusInterval metav1.Duration
	// UsageReclaimMinRuntime: a pod that ran less than this is not
	// reclaimed where only past use, not the present share, puts its queue
	// over its deserved share.
	UsageReclaimMinRuntime metav1.Duration
	// DemandHold is how long a queue keeps the demand it had after its
	// pods finish or leave, for its controllers to replace them, before
	// other queues may borrow what it deserved; 0: none.
	DemandHold metav1.Duration
}
