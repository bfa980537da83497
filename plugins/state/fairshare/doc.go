// Package fairshare computes the queues' deserved shares: weighted
// water-filling, level by level, with guarantee (a floor), capability (a
// cap) and hierarchy (a parent's share split among its children), solved
// exactly per resource (see Deserve).
//
// Past use can bend the split (usage.go). Per queue and resource, Usage
// keeps two moving averages with one half-life: of what the queue held
// above its guarantee and of the pool it shared in (the cluster for a
// top-level queue, its parent's deserved share below), so their ratio is
// the fraction of its pool it used, recent use counting most. Among
// active siblings, a queue's use relative to its weighted share,
// ρ = fraction / (w / Σw), sets a factor 2^(−k·min(ρ, 3)) on its weight
// for what is above the guarantees (Node.UsageFactor). The rule is the
// same at every depth (each level compares siblings within their own
// pool), never moves a queue below its guarantee or above its capability
// or demand (the water-filling's floors and caps are untouched), never
// gives a weight below 2^(−3k) of itself (no starvation), and changes
// nothing where siblings used their pools in proportion to their weights
// (equal factors) or where no factor is set (the split is then exactly
// the one without usage).
//
// Why it converges and cannot loop: the factors depend only on the
// averages, which move continuously and at most half-way per half-life;
// a queue above its weighted share gets a smaller factor, so its share
// (and then its allocation, which the averages follow) falls, and its ρ
// with it; a queue below rises the same way. Both directions push ρ
// toward 1, where the factors are equal and the split is the weights'
// own, so the shares settle at the weighted split with no overshoot that
// outlasts a half-life (the averages lag the allocation, they do not
// amplify it). Nothing in a share depends on the order of events.
//
// It is pure: no informers, no locks, no clock of its own (the caller
// passes the time, so tests run a simulated hour in microseconds).
// Package state builds the queue tree from the Queue objects and what
// their pods use and ask for.
package fairshare
