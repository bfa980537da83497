// Package dra reads the scheduler's Dynamic Resource Allocation state into
// device views (package devices): it is the one place flotilla reads the
// DRA manager's listers. A Reader is one per scheduler (Store.Devices); it
// keeps the verdicts of the classes' CEL selectors on the slices' devices
// between checks (while neither object's ResourceVersion changes) and the
// cluster's device totals, each under a lock of its own. A check asks it
// for a devices.View before it starts (View: the classes, the check's
// pods' claims and templates, and, when the pods ask for devices, the
// slices, the allocated state and the verdicts of the classes asked for)
// and plans over that value alone. Charges, held devices and what an
// eviction releases are judged by the rules of package devices over a
// view of the classes and the pod's claims.
package dra
