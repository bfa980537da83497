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
// Scarce-resource protection: a node "holds" a scarce resource (args
// scarceResources, default nvidia.com/gpu) when it advertises a non-zero
// allocatable amount of it. A pod that does not request a scarce resource
// that a node holds should not take room on that node: when the feasible
// nodes include both kinds, every node free of unrequested scarce resources
// scores above every node that holds one (the former are mapped to
// 50..100, the latter to 0..50, each keeping its packing order). When all
// feasible nodes are of one kind the formula above is the score unchanged.
// So CPU-only pods fill CPU-only nodes first and spill onto GPU nodes only
// when nothing else fits.
//
// The plugin's weight in the profile is its weight among the scores; the
// shipped profile disables the in-tree scores that spread pods out.
package binpack
