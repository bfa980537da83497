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
	// Reservation holds room for a gang its queue admits that cannot be
	// placed now: on the nodes where its quorum will fit soonest, freed
	// room stays free for it, so a stream of smaller work cannot keep it
	// waiting for ever (see plugins/gang/doc.go).
	Reservation *ReservationArgs `json:"reservation,omitempty"`
}

// ReservationArgs configures how gangs hold room.
type ReservationArgs struct {
	// MaxGangs is how many gangs may hold room at once, the first to
	// reserve first; 1 is EASY backfill (the first gang waiting is never
	// delayed). Default 0: reservation off, every gang places as without
	// it.
	MaxGangs *int32 `json:"maxGangs,omitempty"`
	// AfterSeconds is how long a gang waits, from its PodGroup's
	// creation, before it holds room: a gang that fits within it holds
	// nothing. Default 10.
	AfterSeconds *int64 `json:"afterSeconds,omitempty"`
	// MaxClusterPercent is the most of the cluster's allocatable, of any
	// resource, one reservation may hold; a gang that would hold more
	// holds nothing and says so. Default 80; 1 to 100.
	MaxClusterPercent *int32 `json:"maxClusterPercent,omitempty"`
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
	// UsageHalfLife turns on fairness over time: each queue's use above its
	// guarantee is remembered as a moving average with this half-life, and
	// a queue that used more than its weighted share of its pool deserves
	// less of what is contended until its use evens out (never less than
	// 2^(-3k) of its weight's worth, never below its guarantee, never
	// above its capability). Default 0: off, shares are what queues hold
	// now. Typical: 1h to 7d. At most 90 days.
	UsageHalfLife *metav1.Duration `json:"usageHalfLife,omitempty"`
	// UsageWeight is how strongly past use bends the shares, 0 < k <= 4:
	// with k = 1 a queue that held a two-queue pool alone weighs a quarter
	// of a newcomer, which deserves 80% of what is contended at first.
	// Default 1.
	UsageWeight *float64 `json:"usageWeight,omitempty"`
	// UsageStatusInterval is how often the leader writes each queue's
	// usage to its status (status.usage), which a restarted or new leader
	// seeds from: at most this much of the average is lost on a crash.
	// Default 30s; at least 1s.
	UsageStatusInterval *metav1.Duration `json:"usageStatusInterval,omitempty"`
	// UsageReclaimMinRuntime: a pod that ran less than this is not evicted
	// where only past use puts its queue over its deserved share (its
	// queue holds no more than it would deserve with usage off), so shares
	// moved by usage cannot evict the same work back and forth. Default
	// 5m.
	UsageReclaimMinRuntime *metav1.Duration `json:"usageReclaimMinRuntime,omitempty"`
	// DemandHold is how long a queue's demand (what it holds and what it
	// has pending) counts at its recent height after its pods finish or
	// are evicted: the time a Job or ReplicaSet takes to replace them
	// (the Job controller creates replacements in batches of 1, 2, 4, ...).
	// Without it a queue whose pods finish together deserves nothing for
	// that moment, another queue borrows its share, and reclaim evicts
	// the borrowed pods when the replacements arrive, back and forth.
	// Nothing is evicted for a held demand; others only wait to borrow.
	// Default 5s; 0 turns it off; at most 5m.
	DemandHold *metav1.Duration `json:"demandHold,omitempty"`
}
