package devices

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Counts are a node's devices per class key: Total match the class;
// Free of those are not allocated and carry no taint the demanding
// requests do not tolerate. SharedFree and SharedTotal are the part of
// Free and Total from slices several nodes see (all nodes, a node
// selector: network-attached devices): summed over nodes, those count
// once per node, though they are one pool (see Catalog.SharedOnce).
type Counts struct {
	Free, Total             capacity.Resources
	SharedFree, SharedTotal capacity.Resources
}

// newCounts are zero counts for the keys a class is counted under.
func (c *Catalog) newCounts(keys []corev1.ResourceName) Counts {
	counts := Counts{Free: capacity.Resources{}, Total: capacity.Resources{}, SharedFree: capacity.Resources{}, SharedTotal: capacity.Resources{}}
	for _, key := range keys {
		if c.v.IsDeviceKey(key) {
			counts.Free[key], counts.Total[key] = 0, 0
		}
	}
	return counts
}

// FreeOn is, per device key in keys, how many devices of that class the
// node has free (see Counts).
func (c *Catalog) FreeOn(node *corev1.Node, keys []corev1.ResourceName) (capacity.Resources, error) {
	counts, err := c.CountOn(node, keys)
	return counts.Free, err
}

// CountOn counts the node's devices of the classes counted under keys
// (names no class is counted under are left out). A Catalog counts each
// node once: every call of one Catalog must ask for the same keys, as one
// check does.
func (c *Catalog) CountOn(node *corev1.Node, keys []corev1.ResourceName) (Counts, error) {
	if counts, ok := c.counts[node.Name]; ok {
		return counts, nil
	}
	if err := c.v.Err(); err != nil {
		return Counts{}, err
	}
	counts := c.newCounts(keys)
	if c.v == nil {
		return counts, nil
	}
	for _, slice := range c.v.sliceOf[node.Name] {
		if err := c.countSlice(node, slice, counts); err != nil {
			return Counts{}, err
		}
	}
	for _, slice := range c.v.anyNode {
		if err := c.countSlice(node, slice, counts); err != nil {
			return Counts{}, err
		}
	}
	c.counts[node.Name] = counts
	return counts, nil
}

// SharedOnce counts the devices of slices several nodes see once each,
// whichever nodes see them: what the nodes' SharedFree and SharedTotal
// are, in all. A device several claims may share counts once here.
func (c *Catalog) SharedOnce(keys []corev1.ResourceName) (Counts, error) {
	if err := c.v.Err(); err != nil {
		return Counts{}, err
	}
	counts := c.newCounts(keys)
	if c.v == nil {
		return counts, nil
	}
	for _, slice := range c.v.anyNode {
		if err := c.countSlice(nil, slice, counts); err != nil {
			return Counts{}, err
		}
	}
	return counts, nil
}

// countSlice adds the slice's devices the node sees (nil: every device
// several nodes see, once) to counts.
func (c *Catalog) countSlice(node *corev1.Node, slice *resourceapi.ResourceSlice, counts Counts) error {
	sliceWide := !ptr.Deref(slice.Spec.PerDeviceNodeSelection, false)
	sees := func(name *string, all *bool, selector *corev1.NodeSelector) (seen, shared bool, err error) {
		shared = ptr.Deref(name, "") == ""
		if node == nil {
			return shared, shared, nil
		}
		seen, err = c.onNode(node, name, all, selector)
		return seen, shared, err
	}
	var sliceShared bool
	if sliceWide {
		seen, shared, err := sees(slice.Spec.NodeName, slice.Spec.AllNodes, slice.Spec.NodeSelector)
		if err != nil || !seen {
			return err
		}
		sliceShared = shared
	}
	matchOf := make(map[corev1.ResourceName][]bool, len(counts.Total))
	for key := range counts.Total {
		class, _ := c.v.classKeyed(key)
		match, err := c.v.matches(class, slice)
		if err != nil {
			return err
		}
		matchOf[key] = match
	}
	for i := range slice.Spec.Devices {
		device := &slice.Spec.Devices[i]
		shared := sliceShared
		if !sliceWide {
			seen, deviceShared, err := sees(device.NodeName, device.AllNodes, device.NodeSelector)
			if err != nil {
				return err
			}
			if !seen {
				continue
			}
			shared = deviceShared
		}
		id := structured.MakeDeviceID(slice.Spec.Driver, slice.Spec.Pool.Name, device.Name)
		// A device several claims may share (consumable capacity) is
		// free while it has capacity left: shares taken do not take it.
		// How many more shares fit the count cannot tell, so on a node it
		// counts once per pod the node can hold, a bound no plan exceeds;
		// the allocator, member by member, judges the capacity.
		shareable := ptr.Deref(device.AllowMultipleAllocations, false)
		units := int64(1)
		allocated := structured.IsDeviceAllocated(id, c.v.allocated)
		if shareable {
			allocated = c.v.allocated.AllocatedDevices.Has(id)
			if node != nil {
				units = podsOn(node)
				c.partitioned[node.Name] = true
			}
		}
		if node != nil && len(device.ConsumesCounters) > 0 {
			c.partitioned[node.Name] = true
		}
		for key := range counts.Total {
			if !matchOf[key][i] {
				continue
			}
			free := !allocated && c.tolerated(key, device.Taints)
			counts.Total[key] += units
			if free {
				counts.Free[key] += units
			}
			if shared {
				counts.SharedTotal[key] += units
				if free {
					counts.SharedFree[key] += units
				}
			}
		}
	}
	return nil
}

// podsOn is how many pods the node can hold: its allocatable pods, else
// the kubelet's default of 110.
func podsOn(node *corev1.Node) int64 {
	if q, ok := node.Status.Allocatable[corev1.ResourcePods]; ok && q.Value() > 0 {
		return q.Value()
	}
	return 110
}

func (c *Catalog) onNode(node *corev1.Node, name *string, all *bool, selector *corev1.NodeSelector) (bool, error) {
	if ptr.Deref(all, false) {
		return true, nil
	}
	if n := ptr.Deref(name, ""); n != "" {
		return n == node.Name, nil
	}
	if selector == nil {
		return false, nil
	}
	return structured.NodeMatches(c.v.features, node, "", false, selector)
}

// tolerated reports whether the requests demanding key tolerate every
// NoSchedule and NoExecute taint of the device.
func (c *Catalog) tolerated(key corev1.ResourceName, taints []resourceapi.DeviceTaint) bool {
	for _, taint := range taints {
		if taint.Effect != resourceapi.DeviceTaintEffectNoSchedule && taint.Effect != resourceapi.DeviceTaintEffectNoExecute {
			continue
		}
		ok := false
		for _, tol := range c.tolerations[key] {
			if resourceclaim.ToleratesTaint(tol, taint) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// Shortage is how short of one class's devices a demand is: Need summed
// over the members, Each the most one member needs; Free and MostFree
// the nodes' free devices in sum and on the emptiest node; Total and
// MostTotal the same for every device of the class, allocated or not.
type Shortage struct {
	Class            string
	Need, Each       int64
	Free, MostFree   int64
	Total, MostTotal int64
}

// String says how short: "needs 16 devices of class gpu.example.com: 7
// free, at most 3 on one node". When the nodes do not have that many
// devices of the class at all — in sum, or on one node for the member
// needing most — it says so: no pod finishing or evicted frees them, only
// a driver publishing more ("...; the nodes have 8 in all, at most 8 on
// one node: it waits until more are published").
func (s Shortage) String() string {
	msg := fmt.Sprintf("needs %d devices of class %s: %d free, at most %d on one node", s.Need, s.Class, s.Free, s.MostFree)
	if s.Need > s.Total || s.Each > s.MostTotal {
		msg += fmt.Sprintf("; the nodes have %d in all, at most %d on one node: it waits until more are published", s.Total, s.MostTotal)
	}
	return msg
}
