package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/apis/config"
)

// addConversionFuncs registers the v1 <-> internal conversions. The types are
// small and differ only in optional pointers, so they are written out rather
// than generated.
func addConversionFuncs(s *runtime.Scheme) error {
	if err := s.AddConversionFunc((*ProportionArgs)(nil), (*config.ProportionArgs)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*ProportionArgs), b.(*config.ProportionArgs)
		out.DefaultQueue = ptr.Deref(in.DefaultQueue, "")
		out.UsageHalfLife = ptr.Deref(in.UsageHalfLife, metav1.Duration{})
		out.UsageWeight = ptr.Deref(in.UsageWeight, 0)
		out.UsageStatusInterval = ptr.Deref(in.UsageStatusInterval, metav1.Duration{})
		out.UsageReclaimMinRuntime = ptr.Deref(in.UsageReclaimMinRuntime, metav1.Duration{})
		out.DemandHold = ptr.Deref(in.DemandHold, metav1.Duration{})
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*config.ProportionArgs)(nil), (*ProportionArgs)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*config.ProportionArgs), b.(*ProportionArgs)
		out.DefaultQueue = ptr.To(in.DefaultQueue)
		out.UsageHalfLife = ptr.To(in.UsageHalfLife)
		out.UsageWeight = ptr.To(in.UsageWeight)
		out.UsageStatusInterval = ptr.To(in.UsageStatusInterval)
		out.UsageReclaimMinRuntime = ptr.To(in.UsageReclaimMinRuntime)
		out.DemandHold = ptr.To(in.DemandHold)
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*GangArgs)(nil), (*config.GangArgs)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*GangArgs), b.(*config.GangArgs)
		out.PermitWaitingTimeSeconds = ptr.Deref(in.PermitWaitingTimeSeconds, 0)
		out.BackoffSeconds = ptr.Deref(in.BackoffSeconds, 0)
		out.MaxMembersInFlight = ptr.Deref(in.MaxMembersInFlight, 0)
		out.TopologyLevels = append([]string(nil), in.TopologyLevels...)
		if r := in.Reservation; r != nil {
			out.Reservation = config.ReservationArgs{MaxGangs: ptr.Deref(r.MaxGangs, 0), AfterSeconds: ptr.Deref(r.AfterSeconds, 0), MaxClusterPercent: ptr.Deref(r.MaxClusterPercent, 0)}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*config.GangArgs)(nil), (*GangArgs)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*config.GangArgs), b.(*GangArgs)
		out.PermitWaitingTimeSeconds = ptr.To(in.PermitWaitingTimeSeconds)
		out.BackoffSeconds = ptr.To(in.BackoffSeconds)
		out.MaxMembersInFlight = ptr.To(in.MaxMembersInFlight)
		out.TopologyLevels = append([]string(nil), in.TopologyLevels...)
		out.Reservation = &ReservationArgs{MaxGangs: ptr.To(in.Reservation.MaxGangs), AfterSeconds: ptr.To(in.Reservation.AfterSeconds),
			MaxClusterPercent: ptr.To(in.Reservation.MaxClusterPercent)}
		return nil
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*BinpackArgs)(nil), (*config.BinpackArgs)(nil), func(a, b interface{}, _ conversion.Scope) error {
		return Convert_v1_BinpackArgs_To_config_BinpackArgs(a.(*BinpackArgs), b.(*config.BinpackArgs))
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*config.BinpackArgs)(nil), (*BinpackArgs)(nil), func(a, b interface{}, _ conversion.Scope) error {
		return Convert_config_BinpackArgs_To_v1_BinpackArgs(a.(*config.BinpackArgs), b.(*BinpackArgs))
	})
}

// Convert_v1_BinpackArgs_To_config_BinpackArgs converts defaulted v1 args to
// the internal form. An unset weight converts as 0 (ignored), which only
// happens when defaulting was skipped.
func Convert_v1_BinpackArgs_To_config_BinpackArgs(in *BinpackArgs, out *config.BinpackArgs) error {
	out.Resources = nil
	for _, r := range in.Resources {
		var w int64
		if r.Weight != nil {
			w = *r.Weight
		}
		out.Resources = append(out.Resources, config.ResourceWeight{Name: r.Name, Weight: w})
	}
	out.ScarceResources = append(out.ScarceResources[:0:0], in.ScarceResources...)
	out.DeviceClasses = config.DeviceClassScoring{}
	if d := in.DeviceClasses; d != nil {
		out.DeviceClasses.Weight = ptr.Deref(d.Weight, 0)
		out.DeviceClasses.Scarce = ptr.Deref(d.Scarce, false)
	}
	return nil
}

// Convert_config_BinpackArgs_To_v1_BinpackArgs converts internal args back to
// v1, as the scheduler does when it logs or writes its effective config.
func Convert_config_BinpackArgs_To_v1_BinpackArgs(in *config.BinpackArgs, out *BinpackArgs) error {
	out.Resources = nil
	for _, r := range in.Resources {
		w := r.Weight
		out.Resources = append(out.Resources, ResourceWeight{Name: r.Name, Weight: &w})
	}
	out.ScarceResources = append(out.ScarceResources[:0:0], in.ScarceResources...)
	out.DeviceClasses = &DeviceClassScoring{Weight: ptr.To(in.DeviceClasses.Weight), Scarce: ptr.To(in.DeviceClasses.Scarce)}
	return nil
}
