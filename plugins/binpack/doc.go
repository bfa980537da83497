// Package binpack is a Score plugin that packs pods onto the fullest nodes
// that still fit them, so that whole nodes stay free for large pods.
//
// For every resource r the pod requests and that has weight w_r > 0 in the
// args, with used_r counting every pod the scheduler has bound or assumed on
// the node:
//
//	s_r   = w_r * (used_r + request_r) / allocatable_r
//	score = MaxNodeScore * Σ s_r / Σ w_r
//
// Fuller nodes score higher. A node on which one of those resources would
// not fit scores 0. A pod that requests none of the weighted resources
// scores 0 everywhere, so binpack leaves its placement to the other scores.
//
// Scarce-resource protection (args scarceResources, default nvidia.com/gpu)
// keeps pods that do not need an accelerator from stranding one. A node with
// free units of a scarce resource r that the pod does not request keeps, for
// those units, the proportional share of every other resource:
//
//	reserved_d = free_r / allocatable_r * allocatable_d
//
// A pod that would leave less than reserved_d free of some weighted resource
// d it requests intrudes on the node. When the feasible nodes include both
// intruded and other nodes, every other node scores above every intruded one
// (the others are mapped to 50..100, the intruded to 0..50, each keeping its
// packing order); otherwise the formula above is the score unchanged. So
// CPU-only pods fill CPU-only nodes, may use what a GPU node has left beyond
// its free GPUs' share (all of it once its GPUs are taken), and take a GPU
// node's reserve only when nothing else fits. The protection costs nodes
// when the GPU pods it waits for never come; with scarceResources empty the
// plugin ranks nodes as NodeResourcesFit's MostAllocated does with the same
// weights (docs/benchmarks.md measures both).
//
// Extended resources come two ways. Device-plugin resources (nvidia.com/gpu
// from the NVIDIA device plugin) are in the node's allocatable and are
// scored and protected as above. Devices allocated through DRA are not in
// allocatable: a DeviceClass counts them under a resource name (its
// extendedResourceName, e.g. nvidia.com/gpu, or
// deviceclass.resource.kubernetes.io/<class>; package state/devices). For a
// weighted or scarce resource a node has none of in allocatable, the node's
// devices of that class are its total and the allocated ones its used,
// counted once per pod in PreScore from the scheduler's own DRA state. A
// pod asking for them by extended resource or by claim (template) requests
// what its claims take. So a CPU-only pod keeps off a node with free DRA
// GPUs as it does off one with free device-plugin GPUs. A resource neither
// in allocatable nor served by a class is left out of the score: the node
// is ranked on the pod's other weighted resources.
//
// Every DeviceClass's devices are scored without being listed (args
// deviceClasses, default weight 4 and scarce): a pod's devices of a class
// whose resource name resources does not list weigh deviceClasses.weight,
// and every class's resource name is scarce beside scarceResources. So a
// cluster whose GPUs come from a DRA driver serving example.com/gpu, or
// no extended resource at all (deviceclass.resource.kubernetes.io/<class>),
// packs and protects them as the shipped profile does nvidia.com/gpu. A
// pod asking for a class by its implicit name counts under the class's
// resource name. Listing a class's name in resources (weight 0 included)
// overrides the weight; deviceClasses.scarce false leaves the protection
// to scarceResources.
//
// The plugin's weight in the profile is its weight among the scores; the
// shipped profile disables the in-tree scores that spread pods out.
//
// Native PodGroups with TopologyAwareWorkloadScheduling on: kube-scheduler
// tries a group in several placements (one per topology domain) and keeps
// the one its PlacementScore plugins rank first; Binpack ranks them
// (placement.go) by, in this order, members placed (more first), members
// that would intrude on what a node keeps for its free scarce resources
// (fewer first), and the placement's packing: the Score formula with the
// group's requests added and the amounts summed over the placement's
// nodes (fuller first). NormalizePlacementScore turns the three ranks into
// bands (0 for fewer members than the best; 1..50 for more intruders than
// the fewest; 51..100 otherwise, by packing), so that no weight makes
// packing outrank members placed or stranded GPUs. Of two zones that both
// hold a gang, the one it fills better takes it, and the emptier stays
// whole for a larger gang.
package binpack
