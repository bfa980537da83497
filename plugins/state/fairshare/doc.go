// Package fairshare computes the queues' deserved shares: weighted
// water-filling, level by level, with guarantee (a floor), capability (a
// cap) and hierarchy (a parent's share split among its children), solved
// exactly per resource (see Deserve).
//
// It is pure: no informers, no locks. Package state builds the queue tree
// from the Queue objects and what their pods use and ask for.
package fairshare
