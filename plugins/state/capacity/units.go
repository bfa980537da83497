package capacity

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The units rule, in one place: Resources count cpu in millicores and
// every other resource in its base unit (bytes, devices, pods). A new
// resource with units of its own is taught here and nowhere else.

// perAPIUnit is how many of Resources' units make one of the API's (one
// core is 1000 millicores).
func perAPIUnit(name corev1.ResourceName) float64 {
	if name == corev1.ResourceCPU {
		return 1000
	}
	return 1
}

// amountOf is a quantity in Resources' units.
func amountOf(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// QuantityOf is an amount of the resource as the API writes it: cpu from
// millicores, memory and ephemeral storage in binary units.
func QuantityOf(name corev1.ResourceName, v int64) resource.Quantity {
	switch name {
	case corev1.ResourceCPU:
		return *resource.NewMilliQuantity(v, resource.DecimalSI)
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return *resource.NewQuantity(v, resource.BinarySI)
	}
	return *resource.NewQuantity(v, resource.DecimalSI)
}

// Format is QuantityOf as text ("3500m", "16Gi", "8"), for messages.
func Format(name corev1.ResourceName, v int64) string {
	q := QuantityOf(name, v)
	return q.String()
}

// InAPIUnits is an amount in the API's unit (cpu in cores), as metrics
// show it.
func InAPIUnits(name corev1.ResourceName, v float64) float64 { return v / perAPIUnit(name) }

// FromAPIUnits is InAPIUnits' inverse.
func FromAPIUnits(name corev1.ResourceName, v float64) float64 { return v * perAPIUnit(name) }

// FractionalQuantity is a fractional amount in Resources' units (an
// average over time) as a quantity kept to a millionth of the API's unit:
// an average of a third of a GPU is kept, not rounded away; memory to the
// byte. Zero is nil.
func FractionalQuantity(name corev1.ResourceName, v float64) *resource.Quantity {
	var q *resource.Quantity
	if name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage {
		q = resource.NewQuantity(int64(math.Round(v)), resource.BinarySI)
	} else {
		q = resource.NewScaledQuantity(int64(math.Round(InAPIUnits(name, v)*1e6)), resource.Micro)
	}
	if q.IsZero() {
		return nil
	}
	return q
}
