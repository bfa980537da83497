// Package capacity is flotilla's resource model: amounts per resource
// (Resources; cpu in millicores, everything else in its base unit), what a
// pod asks for (Request), what a node has free, and first fit of a gang's
// members over the nodes' free capacity (FreeView, FirstFit), whose
// placement is a plan of slots (PlanSlot).
//
// It is pure: no informers, no locks, no cluster. Package state composes
// it with the scheduler's view; the gang's quorum and topology checks,
// the queues' accounting and preemption's simulation all count by it.
package capacity
