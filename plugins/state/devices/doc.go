// Package devices is flotilla's view of devices allocated through Dynamic
// Resource Allocation (resource.k8s.io/v1): how many devices of each class
// a pod's claims will take, and how many of each class a node has free.
// On a cluster whose accelerators come through DRA, nodes have no GPU in
// allocatable; counting devices here is what lets the gang's quorum check
// and plans see them.
//
// A device class is counted under one resource name, its Key: the
// class's extendedResourceName when it has one (so `example.com/gpu: 1`
// in a container and a claim of that class count alike), else
// deviceclass.resource.kubernetes.io/<class>, the implicit extended
// resource 1.37 gives every class. The counts are amounts in a
// capacity.Resources, beside cpu and memory, so first fit, plans and
// held room treat them as one more resource per node.
//
// Everything is read from the scheduler's own DRA state
// (fwk.SharedDRAManager): the claims it has allocated in flight for
// members waiting at Permit count as allocated here too, which informers
// of our own would miss. Device selectors are the classes' CEL, evaluated
// by k8s.io/dynamic-resource-allocation/cel once per class and slice
// version (the Reader keeps the verdicts while neither object changes);
// node selection of slices is structured.NodeMatches with the scheduler's
// features.
//
// What a pod demands (Catalog.Demand):
//   - a claim already allocated: nothing (its devices are out of every
//     node's free count already);
//   - a claim or a claim template's spec not allocated yet: per request,
//     an exact count charges its count (default 1), allocationMode All
//     one device (at least one; the allocator decides how many), an
//     adminAccess request nothing (it consumes no device), a prioritized
//     list (firstAvailable) its first alternative;
//   - a claim referenced by several pods counts once: for the first pod of
//     a check that reaches it;
//   - an extended resource a class serves is in the pod's requests
//     already (capacity.Request) under the class's Key: nothing more.
//
// What a node has free (Catalog.FreeOn): devices of its slices (by node
// name, all nodes, or node selector, slice-wide or per device) that match
// the class's selectors, are not allocated and carry no NoSchedule or
// NoExecute taint (from the slice or a DeviceTaintRule) that the
// demanding requests do not tolerate. It is a count, the cheap first
// check, exact for claims of n whole devices of a class.
//
// Where a count can over-count (Catalog.FreeFor, confirm.go) — a
// request's own selectors, constraints between a claim's devices
// (matchAttribute, distinctAttribute), consumable capacity, allocationMode
// All, a prioritized list, or a node whose devices share counters or
// allow several allocations — the structured allocator, built with the
// scheduler's features over the same allocated state, confirms how many
// of the check's pods (in the order first fit places them) it can
// allocate together on the node, and the node's free count becomes what
// those pods take. It runs only on nodes the count lets at least one pod
// onto, by halves over the pods the count allows. Other placing gangs'
// plans are set aside from the count, and where the allocator confirms,
// the unallocated claims of the members those plans still place on the
// node are handed to it first (Catalog.Hold): which devices a plan will
// take is as much beyond a count as which devices a gang can use.
//
// Preemption's simulation confirms its plans with the allocator too, on
// the devices its victims free (Catalog.AllocatableOn,
// Reader.ReleasedDevices). Binpack reads the count (FreeOn) only: it
// scores, and Filter has refused the nodes the allocator would. In queue
// accounting (Reader.Charge) a claim several pods share is charged once,
// to the first pod its reservedFor lists (Pays).
//
// It is pure of informers and locks: package state composes it.
package devices
