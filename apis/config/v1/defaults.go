package v1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// DefaultScarceResource is the accelerator most clusters mean by "scarce".
const DefaultScarceResource corev1.ResourceName = "nvidia.com/gpu"

// DefaultDeviceClassWeight weighs DRA devices as the shipped profile
// weighs nvidia.com/gpu: a device is worth several cores.
const DefaultDeviceClassWeight int64 = 4

// SetDefaults_BinpackArgs fills what the user left out.
func SetDefaults_BinpackArgs(obj *BinpackArgs) {
	if len(obj.Resources) == 0 {
		obj.Resources = []ResourceWeight{
			{Name: corev1.ResourceCPU, Weight: ptr.To[int64](1)},
			{Name: corev1.ResourceMemory, Weight: ptr.To[int64](1)},
		}
	}
	for i := range obj.Resources {
		if obj.Resources[i].Weight == nil {
			obj.Resources[i].Weight = ptr.To[int64](1)
		}
	}
	// nil means "not written"; an explicit [] survives decoding as an empty,
	// non-nil slice and switches the protection off.
	if obj.ScarceResources == nil {
		obj.ScarceResources = []corev1.ResourceName{DefaultScarceResource}
	}
	if obj.DeviceClasses == nil {
		obj.DeviceClasses = &DeviceClassScoring{}
	}
	if obj.DeviceClasses.Weight == nil {
		obj.DeviceClasses.Weight = ptr.To(DefaultDeviceClassWeight)
	}
	if obj.DeviceClasses.Scarce == nil {
		obj.DeviceClasses.Scarce = ptr.To(true)
	}
}

// Gang defaults: scheduler-plugins' Coscheduling waits 60s in Permit; a short
// back-off lets the next gang in queue order try while this one retries soon.
const (
	DefaultPermitWaitingTimeSeconds int64 = 60
	DefaultGangBackoffSeconds       int64 = 10
	// DefaultMaxMembersInFlight bounds the members past their cycle (in
	// Permit, PreBind or Bind): unpaced, gangs with DRA devices hold
	// several times the default profile's, and the memory their cycle
	// states keep grows with them (docs/benchmarks.md has the
	// measurement that chose 96).
	DefaultMaxMembersInFlight int64 = 96
)

// SetDefaults_GangArgs fills what the user left out.
func SetDefaults_GangArgs(obj *GangArgs) {
	if obj.PermitWaitingTimeSeconds == nil {
		obj.PermitWaitingTimeSeconds = ptr.To(DefaultPermitWaitingTimeSeconds)
	}
	if obj.BackoffSeconds == nil {
		obj.BackoffSeconds = ptr.To(DefaultGangBackoffSeconds)
	}
	if obj.MaxMembersInFlight == nil {
		obj.MaxMembersInFlight = ptr.To(DefaultMaxMembersInFlight)
	}
	if obj.Reservation == nil {
		obj.Reservation = &ReservationArgs{}
	}
	if obj.Reservation.MaxGangs == nil {
		obj.Reservation.MaxGangs = ptr.To(DefaultReservationMaxGangs)
	}
	if obj.Reservation.AfterSeconds == nil {
		obj.Reservation.AfterSeconds = ptr.To(DefaultReservationAfterSeconds)
	}
	if obj.Reservation.MaxClusterPercent == nil {
		obj.Reservation.MaxClusterPercent = ptr.To(DefaultReservationMaxClusterPercent)
	}
}

// Reservation defaults: off (maxGangs 0) until a profile turns it on; then
// a gang holds room once it has waited as long as a gang back-off, for at
// most 80% of any resource, so that a reservation never stops the rest of
// the cluster.
const (
	DefaultReservationMaxGangs          int32 = 0
	DefaultReservationAfterSeconds      int64 = 10
	DefaultReservationMaxClusterPercent int32 = 80
)

// DefaultQueueName is the queue of pods that name none.
const DefaultQueueName = "default"

// SetDefaults_ProportionArgs fills what the user left out.
func SetDefaults_ProportionArgs(obj *ProportionArgs) {
	if obj.DefaultQueue == nil {
		obj.DefaultQueue = ptr.To(DefaultQueueName)
	}
	if obj.UsageHalfLife == nil {
		obj.UsageHalfLife = &metav1.Duration{}
	}
	if obj.UsageWeight == nil {
		obj.UsageWeight = ptr.To(DefaultUsageWeight)
	}
	if obj.UsageStatusInterval == nil {
		obj.UsageStatusInterval = &metav1.Duration{Duration: DefaultUsageStatusInterval}
	}
	if obj.UsageReclaimMinRuntime == nil {
		obj.UsageReclaimMinRuntime = &metav1.Duration{Duration: DefaultUsageReclaimMinRuntime}
	}
	if obj.DemandHold == nil {
		obj.DemandHold = &metav1.Duration{Duration: DefaultDemandHold}
	}
}

// DefaultDemandHold covers the Job controller's replacement of a cohort of
// finished pods (its batches of 1, 2, 4, 8 take up to about 1.5 s on a
// loaded 2-core machine) with room to spare.
const DefaultDemandHold = 5 * time.Second

// Usage defaults: off; when on, k = 1 (a newcomer beside a queue that held
// the pool alone deserves 80% of what is contended), usage persisted every
// 30s (a crash loses at most 30s of the average: 0.6% of it at a one-hour
// half-life), and five minutes of run time before a pod may be evicted
// for usage alone.
const (
	DefaultUsageWeight            = 1.0
	DefaultUsageStatusInterval    = 30 * time.Second
	DefaultUsageReclaimMinRuntime = 5 * time.Minute
)
