// Package validation checks flotilla's plugin args after defaulting. Each
// error carries the field path under `args`, so a start-up failure names the
// exact field to fix.
package validation

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-sched/flotilla/apis/config"
)

// MaxResourceWeight bounds a resource weight so that weighted sums over any
// realistic number of resources stay far from overflow.
const MaxResourceWeight = 100

// ValidateBinpackArgs validates the Binpack plugin's args.
func ValidateBinpackArgs(path *field.Path, args *config.BinpackArgs) error {
	var errs field.ErrorList
	errs = append(errs, validateResourceWeights(path.Child("resources"), args.Resources)...)
	errs = append(errs, validateResourceNames(path.Child("scarceResources"), args.ScarceResources)...)
	if w := args.DeviceClasses.Weight; w < 0 || w > MaxResourceWeight {
		errs = append(errs, field.Invalid(path.Child("deviceClasses", "weight"), w, fmt.Sprintf("must be in the range 0-%d", MaxResourceWeight)))
	}
	return errs.ToAggregate()
}

func validateResourceWeights(path *field.Path, resources []config.ResourceWeight) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		return append(errs, field.Required(path, "at least one resource must be weighted"))
	}
	seen := make(map[corev1.ResourceName]bool, len(resources))
	anyPositive := false
	for i, r := range resources {
		item := path.Index(i)
		errs = append(errs, validateResourceName(item.Child("name"), r.Name)...)
		if seen[r.Name] {
			errs = append(errs, field.Duplicate(item.Child("name"), r.Name))
		}
		seen[r.Name] = true
		if r.Weight < 0 || r.Weight > MaxResourceWeight {
			errs = append(errs, field.Invalid(item.Child("weight"), r.Weight, fmt.Sprintf("must be in the range 0-%d", MaxResourceWeight)))
		}
		if r.Weight > 0 {
			anyPositive = true
		}
	}
	if !anyPositive {
		errs = append(errs, field.Invalid(path, resources, "at least one weight must be greater than 0"))
	}
	return errs
}

func validateResourceNames(path *field.Path, names []corev1.ResourceName) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[corev1.ResourceName]bool, len(names))
	for i, name := range names {
		errs = append(errs, validateResourceName(path.Index(i), name)...)
		if seen[name] {
			errs = append(errs, field.Duplicate(path.Index(i), name))
		}
		seen[name] = true
	}
	return errs
}

// validateResourceName accepts what a node can advertise: the standard
// resources and qualified extended-resource names such as nvidia.com/gpu.
func validateResourceName(path *field.Path, name corev1.ResourceName) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

// MaxPermitWaitingTimeSeconds bounds how long reservations may be held for a
// gang that does not complete: an hour is already far beyond any sane wait.
const MaxPermitWaitingTimeSeconds = 3600

// MaxMembersInFlight bounds the gangs' binding backlog limit: beyond it a
// limit is no limit (and a typo of an extra digit would pass unnoticed).
const MaxMembersInFlight = 100000

// MaxReservingGangs bounds how many gangs may hold room at once: each holds
// room idle while it waits, and every Filter call reads every hold on its
// node.
const MaxReservingGangs = 100

// ValidateGangArgs validates the Gang plugin's args.
func ValidateGangArgs(path *field.Path, args *config.GangArgs) error {
	var errs field.ErrorList
	if args.PermitWaitingTimeSeconds <= 0 || args.PermitWaitingTimeSeconds > MaxPermitWaitingTimeSeconds {
		errs = append(errs, field.Invalid(path.Child("permitWaitingTimeSeconds"), args.PermitWaitingTimeSeconds,
			fmt.Sprintf("must be in the range 1-%d", MaxPermitWaitingTimeSeconds)))
	}
	if args.BackoffSeconds < 0 || args.BackoffSeconds > MaxPermitWaitingTimeSeconds {
		errs = append(errs, field.Invalid(path.Child("backoffSeconds"), args.BackoffSeconds,
			fmt.Sprintf("must be in the range 0-%d", MaxPermitWaitingTimeSeconds)))
	}
	if args.MaxMembersInFlight < 0 || args.MaxMembersInFlight > MaxMembersInFlight {
		errs = append(errs, field.Invalid(path.Child("maxMembersInFlight"), args.MaxMembersInFlight,
			fmt.Sprintf("must be in the range 0-%d (0: no limit)", MaxMembersInFlight)))
	}
	r := path.Child("reservation")
	if args.Reservation.MaxGangs < 0 || args.Reservation.MaxGangs > MaxReservingGangs {
		errs = append(errs, field.Invalid(r.Child("maxGangs"), args.Reservation.MaxGangs,
			fmt.Sprintf("must be in the range 0-%d (0: no reservations)", MaxReservingGangs)))
	}
	if args.Reservation.AfterSeconds < 0 || args.Reservation.AfterSeconds > MaxPermitWaitingTimeSeconds {
		errs = append(errs, field.Invalid(r.Child("afterSeconds"), args.Reservation.AfterSeconds,
			fmt.Sprintf("must be in the range 0-%d", MaxPermitWaitingTimeSeconds)))
	}
	if args.Reservation.MaxGangs > 0 && (args.Reservation.MaxClusterPercent < 1 || args.Reservation.MaxClusterPercent > 100) {
		errs = append(errs, field.Invalid(r.Child("maxClusterPercent"), args.Reservation.MaxClusterPercent, "must be in the range 1-100"))
	}
	seen := map[string]int{}
	for i, level := range args.TopologyLevels {
		p := path.Child("topologyLevels").Index(i)
		for _, msg := range utilvalidation.IsQualifiedName(level) {
			errs = append(errs, field.Invalid(p, level, "must be a node label key: "+msg))
		}
		if j, dup := seen[level]; dup {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s (also topologyLevels[%d])", level, j)))
		}
		seen[level] = i
	}
	return errs.ToAggregate()
}

// ValidateProportionArgs validates the Proportion plugin's args.
func ValidateProportionArgs(path *field.Path, args *config.ProportionArgs) error {
	var errs field.ErrorList
	if args.DefaultQueue == "" {
		errs = append(errs, field.Required(path.Child("defaultQueue"), "pods that name no queue need one"))
	}
	for _, msg := range utilvalidation.IsDNS1123Subdomain(args.DefaultQueue) {
		errs = append(errs, field.Invalid(path.Child("defaultQueue"), args.DefaultQueue, msg))
	}
	switch halfLife := args.UsageHalfLife.Duration; {
	case halfLife < 0:
		errs = append(errs, field.Invalid(path.Child("usageHalfLife"), args.UsageHalfLife.String(), "must be 0 (usage off) or positive"))
	case halfLife > MaxUsageHalfLife:
		errs = append(errs, field.Invalid(path.Child("usageHalfLife"), args.UsageHalfLife.String(), fmt.Sprintf("must be at most %s: use older than that cannot be told from no use", MaxUsageHalfLife)))
	case halfLife > 0 && halfLife < time.Second:
		errs = append(errs, field.Invalid(path.Child("usageHalfLife"), args.UsageHalfLife.String(), "must be at least 1s: shorter is instantaneous fair share, which usageHalfLife 0 gives"))
	}
	if hold := args.DemandHold.Duration; hold < 0 || hold > MaxDemandHold {
		errs = append(errs, field.Invalid(path.Child("demandHold"), args.DemandHold.String(), fmt.Sprintf("must be between 0 (off) and %s: longer keeps an idle queue's share from others for no controller's sake", MaxDemandHold)))
	}
	// The rest is read only with usage on.
	if args.UsageHalfLife.Duration <= 0 {
		return errs.ToAggregate()
	}
	if k := args.UsageWeight; !(k > 0 && k <= MaxUsageWeight) {
		errs = append(errs, field.Invalid(path.Child("usageWeight"), k, fmt.Sprintf("must be above 0 and at most %g", MaxUsageWeight)))
	}
	if args.UsageStatusInterval.Duration < time.Second {
		errs = append(errs, field.Invalid(path.Child("usageStatusInterval"), args.UsageStatusInterval.String(), "must be at least 1s"))
	}
	if args.UsageReclaimMinRuntime.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("usageReclaimMinRuntime"), args.UsageReclaimMinRuntime.String(), "must not be negative"))
	}
	return errs.ToAggregate()
}

// Usage bounds. A half-life of 90 days already remembers a season; a
// usage weight above 4 floors a queue that used its pool alone at 2^-24
// of its weight, which is starving it by another name.
const (
	MaxDemandHold    = 5 * time.Minute
	MaxUsageHalfLife = 90 * 24 * time.Hour
	MaxUsageWeight   = 4.0
)

// Args returns a plugin's args as the type its factory expects, validated:
// every plugin's New starts with this, so a wrong type or a bad field stops
// the scheduler with an error that names the plugin and the field.
func Args[T runtime.Object](plugin string, obj runtime.Object, validate func(*field.Path, T) error) (T, error) {
	args, ok := obj.(T)
	if !ok {
		var zero T
		return zero, fmt.Errorf("%s: want args of type %sArgs, got %T", plugin, plugin, obj)
	}
	if err := validate(field.NewPath("args"), args); err != nil {
		return args, fmt.Errorf("%s: %w", plugin, err)
	}
	return args, nil
}
