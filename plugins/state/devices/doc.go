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
// It reads nothing itself. A View is what package dra read, before a
// check starts, from the scheduler's own DRA state (fwk.SharedDRAManager:
// the claims it has allocated in flight for members waiting at Permit
// count as allocated here too, which informers of our own would miss):
// the classes, the check's pods' claims and templates, the slices, the
// allocated state, and the classes' CEL selectors evaluated on the
// slices' devices (dra.Reader keeps those verdicts while neither object
// changes). A View never changes; a Catalog is one plan's working state
// over it (what its pods demand, each node's counts once counted, the
// claims still to allocate), so plans over one View run in parallel, each
// with its own Catalog. Node selection of slices is structured.NodeMatches
// with the scheduler's features.
//
// What a pod demands (Catalog.Demand):
//   - a claim already allocated: nothing (its devices are out of every
//     node's free count already);
//   - a claim or a claim template's spec not allocated yet: per request,
//     an exact count charges its count (default 1), allocationMode All
//     one device (at least one; the allocator decides how many), an
//     adminAccess request nothing (it consumes no device), a prioritized
//     list (firstAvailable) the fewest devices any alternative takes when
//     all alternatives are of one class key, and nothing when they are of
//     several (the allocator alone judges it: counting the first choice
//     would rule out the nodes only a later alternative fits);
//   - a claim referenced by several pods counts once: for the first pod of
//     a check that reaches it;
//   - an extended resource a class serves is in the pod's requests
//     already, under the class's Key however the pod names the class
//     (View.Requests: the implicit deviceclass.resource.kubernetes.io/
//     name of a class with an extendedResourceName counts under the
//     latter): nothing more.
//
// What a node has free (Catalog.FreeOn): devices of its slices (by node
// name, all nodes, or node selector, slice-wide or per device) that match
// the class's selectors, are not allocated and carry no NoSchedule or
// NoExecute taint (from the slice or a DeviceTaintRule) that the
// demanding requests do not tolerate. A device several claims may share
// (allowMultipleAllocations, consumable capacity) is free while no claim
// holds it whole, shares taken or not, and counts once per pod the node
// can hold: how many more shares its capacity left takes, only the
// allocator can tell. It is a count, the cheap first check, exact for
// claims of n whole devices of a class.
//
// A count rules a node out; it never rules one in. It over-counts where a
// request's own selectors, constraints between a claim's devices
// (matchAttribute, distinctAttribute), consumable capacity,
// allocationMode All or a prioritized list apply, where devices share
// counters, and where two classes match the same devices (each class's
// count includes them). So the gang planner (package planner, which Gang
// and Preemption both call) confirms every member that asks for devices
// with the Ledger (ledger.go): the structured allocator, built
// with the scheduler's features over a copy of the same allocated state,
// allocates that member's claims (and, as DynamicResources does, one
// claim for the extended resources a class serves on a node without them
// in allocatable) on the node the plan gives it, with every device the
// plan's earlier members took marked allocated, and with the claims of
// other placing gangs' members planned on the node (Catalog.Hold)
// allocated first. The Ledger keeps what each fit of the plan took, so
// the plan's search can leave a candidate domain and return to another
// with exactly the devices the fits on its way took; devices a
// preemption's victims hold can be marked free first (Ledger.Free). Each
// run is bounded
// (2 s); a run cut short is a refusal of the node, not an error. What it
// cannot see: allocations made after the catalog was read.
//
// A ResourceSlice several nodes see (all nodes, a node selector:
// network-attached devices) is one pool. Each node's count includes its
// devices, since a member on any of those nodes may take them (the
// Ledger's allocator then sees the pool once, so members placed on
// different nodes never take one device twice); Counts.SharedFree says
// which part of a node's count they are, and Catalog.SharedOnce counts
// them once, for sums over nodes: the gang's shortage message, and the
// cluster totals its domains' best fit is scaled by.
//
// Preemption's simulation plans with the same Ledger on the devices its
// victims free (View.ReleasedDevices); where it searches a single
// member's room node by node it asks Catalog.AllocatableOn, only where a
// count may over-count. Binpack reads the count (CountOn) only, for
// every class (ClassKeys): it scores, and Filter has refused the nodes
// the allocator would. In queue accounting (View.Charge) a claim several
// pods share is charged once, to the first pod its reservedFor lists
// (Pays).
//
// It holds no informer and no lock: package dra reads, package state
// composes.
package devices
