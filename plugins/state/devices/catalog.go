package devices

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Key is the resource name a device class is counted under: its
// extendedResourceName, else the implicit deviceclass.resource.kubernetes.io/<class>.
func Key(class *resourceapi.DeviceClass) corev1.ResourceName {
	if name := ptr.Deref(class.Spec.ExtendedResourceName, ""); name != "" {
		return corev1.ResourceName(name)
	}
	return corev1.ResourceName(resourceapi.ResourceDeviceClassPrefix + class.Name)
}

// Requests are the pod's requests (capacity.Request) with a device class
// asked for by its implicit name, deviceclass.resource.kubernetes.io/<class>,
// counted under the class's Key: a pod asking that way for a class whose
// extendedResourceName is example.com/gpu is charged, capped and placed
// as one asking for example.com/gpu. An implicit name of no class stays
// as it is (nothing serves it; the pod does not fit).
func (r *Reader) Requests(pod *corev1.Pod) capacity.Resources {
	requests := capacity.Request(pod)
	if r == nil || r.dra == nil {
		return requests
	}
	var renamed capacity.Resources
	for name, n := range requests {
		className, implicit := strings.CutPrefix(string(name), resourceapi.ResourceDeviceClassPrefix)
		if !implicit {
			continue
		}
		class, err := r.dra.DeviceClasses().Get(className)
		if err != nil || class == nil || Key(class) == name {
			continue
		}
		delete(requests, name)
		if renamed == nil {
			renamed = capacity.Resources{}
		}
		renamed[Key(class)] += n
	}
	requests.Add(renamed)
	return requests
}

// Reader reads the scheduler's DRA state. One per scheduler: it holds the
// CEL cache the classes' selectors compile into.
type Reader struct {
	dra       fwk.SharedDRAManager
	templates resourcelisters.ResourceClaimTemplateLister
	features  structured.Features
	cel       *cel.Cache

	// totals of the last Totals, valid while the slices and classes it
	// counted are unchanged (totalsOf says which).
	totalsMu sync.Mutex
	totalsOf uint64
	totals   capacity.Resources
	// verdicts are the classes' selectors evaluated on the slices'
	// devices (see deviceMatches).
	matchMu  sync.Mutex
	verdicts map[sliceClass]classVerdict
}

// NewReader reads through the scheduler's DRA manager (nil: the scheduler
// has no DRA; every count is zero) and a claim template lister, with the
// scheduler's allocator features.
func NewReader(dra fwk.SharedDRAManager, templates resourcelisters.ResourceClaimTemplateLister, features structured.Features) *Reader {
	return &Reader{
		dra: dra, templates: templates, features: features,
		cel: cel.NewCache(32, cel.Features{EnableConsumableCapacity: features.ConsumableCapacity, EnableListTypeAttributes: features.ListTypeAttributes}),
	}
}

// Catalog is one check's view of devices: what pods demand and what nodes
// have free, read once and shared by every fit the check tries. Not safe
// for concurrent use.
type Catalog struct {
	r *Reader
	// classes by name, and by the key they count under.
	classes map[string]*resourceapi.DeviceClass
	byKey   map[corev1.ResourceName]*resourceapi.DeviceClass
	// seen: claims already counted, by namespace/name.
	seen map[string]bool
	// unallocatedUsers: the pods of the check referencing each claim that
	// exists and is not allocated, by namespace/name (see SharedUnallocated).
	unallocatedUsers map[string][]string
	// tolerations per key: what the demanding requests tolerate.
	tolerations map[corev1.ResourceName][]resourceapi.DeviceToleration

	loaded  bool
	loadErr error
	// sliceOf are the slices published for one node by name; anyNode the
	// others (all nodes, a node selector, or per-device node selection),
	// which every node must look at.
	sliceOf   map[string][]*resourceapi.ResourceSlice
	anyNode   []*resourceapi.ResourceSlice
	slices    []*resourceapi.ResourceSlice // all of them
	allocated *structured.AllocatedState
	// counts per node name, once counted.
	counts map[string]Counts

	// What the allocator confirms (see confirm.go): each pod's demand and
	// the claims it still needs allocated, by pod UID; whether a claim
	// has what a count cannot judge; the nodes whose devices share
	// counters or capacity; the allocator, once built.
	demandOf     map[types.UID]capacity.Resources
	claimsOf     map[types.UID][]*resourceapi.ResourceClaim
	beyondCounts bool
	partitioned  map[string]bool
	// deviceAt finds a published device by ID (CountMatching), built once.
	deviceAt map[structured.DeviceID]publishedDevice
	// heldClaims are, per node, the claims of other gangs' members planned
	// there (see Hold).
	heldClaims   map[string][]*resourceapi.ResourceClaim
	allocator    structured.Allocator
	allocatorErr error
}

// Catalog starts a check's view; nothing is read until asked.
func (r *Reader) Catalog() *Catalog {
	return &Catalog{r: r, seen: map[string]bool{}, unallocatedUsers: map[string][]string{}, tolerations: map[corev1.ResourceName][]resourceapi.DeviceToleration{}, counts: map[string]Counts{},
		demandOf: map[types.UID]capacity.Resources{}, claimsOf: map[types.UID][]*resourceapi.ResourceClaim{}, partitioned: map[string]bool{}}
}

func (c *Catalog) loadClasses() error {
	if c.classes != nil {
		return nil
	}
	c.classes, c.byKey = map[string]*resourceapi.DeviceClass{}, map[corev1.ResourceName]*resourceapi.DeviceClass{}
	if c.r == nil || c.r.dra == nil {
		return nil
	}
	list, err := c.r.dra.DeviceClasses().List()
	if err != nil {
		return err
	}
	for _, class := range list {
		c.classes[class.Name] = class
		key := Key(class)
		// Two classes naming one extended resource: the scheduler picks
		// one too; keep the older, as its resolver does.
		if old, ok := c.byKey[key]; !ok || class.CreationTimestamp.Before(&old.CreationTimestamp) {
			c.byKey[key] = class
		}
		c.byKey[corev1.ResourceName(resourceapi.ResourceDeviceClassPrefix+class.Name)] = class
	}
	return nil
}

// IsDeviceKey reports whether name counts devices of a class.
func (c *Catalog) IsDeviceKey(name corev1.ResourceName) bool {
	if err := c.loadClasses(); err != nil {
		return false
	}
	_, ok := c.byKey[name]
	return ok
}

// CountMatching counts, per key of keys, the devices of ids the class
// counted under that key matches: the devices an eviction frees, under
// every class that could use them, whichever class their claims asked by
// (a victim's devices of gpu.example.com serve a preemptor asking by the
// narrower h100.example.com where they are h100s). A device no slice
// publishes any more counts nowhere.
func (c *Catalog) CountMatching(ctx context.Context, ids []structured.DeviceID, keys []corev1.ResourceName) (capacity.Resources, error) {
	if err := c.load(); err != nil {
		return nil, err
	}
	if c.deviceAt == nil {
		c.deviceAt = map[structured.DeviceID]publishedDevice{}
		for _, slice := range c.slices {
			for i := range slice.Spec.Devices {
				c.deviceAt[structured.MakeDeviceID(slice.Spec.Driver, slice.Spec.Pool.Name, slice.Spec.Devices[i].Name)] = publishedDevice{slice: slice, index: i}
			}
		}
	}
	counts := capacity.Resources{}
	for _, key := range keys {
		class, ok := c.byKey[key]
		if !ok {
			continue
		}
		counts[key] = 0
		for _, id := range ids {
			at, ok := c.deviceAt[id]
			if !ok {
				continue
			}
			match, err := c.r.deviceMatches(ctx, class, at.slice)
			if err != nil {
				return nil, err
			}
			if match[at.index] {
				counts[key]++
			}
		}
	}
	return counts, nil
}

// publishedDevice is where a device is published: its slice and index.
type publishedDevice struct {
	slice *resourceapi.ResourceSlice
	index int
}

// ClassKeys are the keys every DeviceClass's devices count under, sorted,
// each once (nil when the classes cannot be read).
func (c *Catalog) ClassKeys() []corev1.ResourceName {
	if err := c.loadClasses(); err != nil {
		return nil
	}
	seen := make(map[corev1.ResourceName]bool, len(c.classes))
	keys := make([]corev1.ResourceName, 0, len(c.classes))
	for _, class := range c.classes {
		if key := Key(class); !seen[key] {
			seen[key] = true
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// ClassOf names the class counted under key, for messages.
func (c *Catalog) ClassOf(key corev1.ResourceName) string {
	if err := c.loadClasses(); err != nil {
		return string(key)
	}
	if class, ok := c.byKey[key]; ok {
		return class.Name
	}
	return string(key)
}

// Demand is what the pod's claims not allocated yet will take, per class
// key, counting a claim only for the first pod of the check that
// references it; asked again for the same pod, it answers the same. An error names what is missing: a claim template or a
// device class that does not exist.
func (c *Catalog) Demand(pod *corev1.Pod) (capacity.Resources, error) {
	if len(pod.Spec.ResourceClaims) == 0 || c.r == nil || c.r.dra == nil {
		return nil, nil
	}
	if demand, ok := c.demandOf[pod.UID]; ok && pod.UID != "" {
		// Read already: its claims are recorded once.
		return demand, nil
	}
	if err := c.loadClasses(); err != nil {
		return nil, err
	}
	demand := capacity.Resources{}
	for _, ref := range pod.Spec.ResourceClaims {
		claim, spec, err := c.claimSpec(pod, ref)
		if err != nil {
			return nil, err
		}
		if spec == nil {
			continue
		}
		for _, req := range spec.Devices.Requests {
			if err := c.addRequest(demand, req); err != nil {
				return nil, fmt.Errorf("pod %s/%s, claim %s: %w", pod.Namespace, pod.Name, ref.Name, err)
			}
		}
		c.toAllocate(pod, ref, claim, spec)
	}
	c.demandOf[pod.UID] = demand
	return demand, nil
}

// claimSpec is the claim the pod's reference resolves to (nil before it
// is generated from its template) and its spec, or nil when it takes
// nothing more: allocated already, or counted for another pod of this
// check.
func (c *Catalog) claimSpec(pod *corev1.Pod, ref corev1.PodResourceClaim) (*resourceapi.ResourceClaim, *resourceapi.ResourceClaimSpec, error) {
	name := claimName(pod, ref)
	if name == "" {
		return c.resolve(pod, ref, name)
	}
	id := pod.Namespace + "/" + name
	if c.seen[id] {
		if users, ok := c.unallocatedUsers[id]; ok {
			c.unallocatedUsers[id] = append(users, pod.Name)
		}
		return nil, nil, nil
	}
	c.seen[id] = true
	claim, spec, err := c.resolve(pod, ref, name)
	if claim != nil && spec != nil {
		c.unallocatedUsers[id] = []string{pod.Name}
	}
	return claim, spec, err
}

// resolve is claimSpec without the check's bookkeeping: the claim named
// name (the pod's generated or own claim; "" before it is generated),
// nil with its template's spec before it exists, or nil when allocated.
func (c *Catalog) resolve(pod *corev1.Pod, ref corev1.PodResourceClaim, name string) (*resourceapi.ResourceClaim, *resourceapi.ResourceClaimSpec, error) {
	if name != "" {
		claim, err := c.r.dra.ResourceClaims().Get(pod.Namespace, name)
		if err == nil {
			if claim.Status.Allocation != nil {
				return nil, nil, nil
			}
			return claim, &claim.Spec, nil
		}
		if !apierrors.IsNotFound(err) || ref.ResourceClaimTemplateName == nil {
			return nil, nil, fmt.Errorf("pod %s/%s: ResourceClaim %s: %w", pod.Namespace, pod.Name, name, err)
		}
	}
	template := ptr.Deref(ref.ResourceClaimTemplateName, "")
	if template == "" {
		return nil, nil, fmt.Errorf("pod %s/%s: resourceClaims[%s] names neither a claim nor a template", pod.Namespace, pod.Name, ref.Name)
	}
	if c.r.templates == nil {
		return nil, nil, fmt.Errorf("pod %s/%s: ResourceClaimTemplate %s: no template lister", pod.Namespace, pod.Name, template)
	}
	// Each pod gets its own claim from a template: never shared.
	t, err := c.r.templates.ResourceClaimTemplates(pod.Namespace).Get(template)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s: ResourceClaimTemplate %s/%s: %w", pod.Namespace, pod.Name, pod.Namespace, template, err)
	}
	return nil, &t.Spec.Spec, nil
}

// SharedUnallocated names a claim (namespace/name) that two or more pods
// of the check reference while it is not allocated, and those pods; ""
// if none. The scheduler allocates a claim for one pod at a time and
// refuses every other pod of the claim while that allocation is in
// flight, which lasts until the first pod binds: when the pods are
// members of one gang that must be placed together, the first waits in
// Permit for the others and the others wait for it, until the gang times
// out, again and again.
func (c *Catalog) SharedUnallocated() (claim string, pods []string) {
	for id, users := range c.unallocatedUsers {
		if len(users) > 1 && (claim == "" || id < claim) {
			claim, pods = id, users
		}
	}
	return claim, pods
}

// Uses reports whether one of the pod's claim references resolves to
// claim: by name, by the pod's status for a claim generated from a
// template, or, before the status records it, by the claim's controller
// being the pod.
func Uses(pod *corev1.Pod, claim *resourceapi.ResourceClaim) bool {
	if claim.Namespace != pod.Namespace {
		return false
	}
	for _, ref := range pod.Spec.ResourceClaims {
		if claimName(pod, ref) == claim.Name {
			return true
		}
	}
	owner := metav1.GetControllerOf(claim)
	return len(pod.Spec.ResourceClaims) > 0 && owner != nil && owner.UID == pod.UID
}

// claimName is the name of the claim a pod's reference resolves to: the
// claim it names, or the one generated from its template (as the pod's
// status records it); "" before that claim exists.
func claimName(pod *corev1.Pod, ref corev1.PodResourceClaim) string {
	if name := ptr.Deref(ref.ResourceClaimName, ""); name != "" {
		return name
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == ref.Name {
			return ptr.Deref(st.ResourceClaimName, "")
		}
	}
	return ""
}

// addRequest charges one device request of a claim, and makes the
// node counts honour its tolerations.
func (c *Catalog) addRequest(demand capacity.Resources, req resourceapi.DeviceRequest) error {
	exact, err := c.countRequest(demand, req)
	if exact != nil {
		key := Key(c.classes[exact.DeviceClassName])
		c.tolerations[key] = append(c.tolerations[key], exact.Tolerations...)
	}
	return err
}

// countRequest adds what one device request of a claim takes to demand,
// and returns the request it counted (nil: nothing).
func (c *Catalog) countRequest(demand capacity.Resources, req resourceapi.DeviceRequest) (*resourceapi.ExactDeviceRequest, error) {
	exact := req.Exactly
	if exact == nil && len(req.FirstAvailable) > 0 {
		var err error
		if exact, err = c.leastAlternative(req.FirstAvailable); exact == nil || err != nil {
			return nil, err
		}
	}
	if exact == nil {
		return nil, nil
	}
	class, ok := c.classes[exact.DeviceClassName]
	if !ok {
		return nil, fmt.Errorf("DeviceClass %s not found", exact.DeviceClassName)
	}
	if ptr.Deref(exact.AdminAccess, false) {
		return nil, nil
	}
	count := int64(1)
	if exact.AllocationMode == resourceapi.DeviceAllocationModeExactCount || exact.AllocationMode == "" {
		count = max(exact.Count, 1)
	}
	demand[Key(class)] += count
	return exact, nil
}

// leastAlternative is what a prioritized list takes at least, as one
// request for the count: the allocator tries the alternatives in order on
// each node, so a count must not rule a node out that a later, smaller
// or other-class alternative fits. When every alternative is of one class
// key, that is the fewest devices any of them takes, tolerating what any
// of them tolerates; when they differ in class, nothing is counted (nil)
// and the allocator, member by member, decides alone. An alternative of
// adminAccess or allocationMode All counts as one device.
func (c *Catalog) leastAlternative(alternatives []resourceapi.DeviceSubRequest) (*resourceapi.ExactDeviceRequest, error) {
	var least *resourceapi.ExactDeviceRequest
	var key corev1.ResourceName
	for _, sub := range alternatives {
		class, ok := c.classes[sub.DeviceClassName]
		if !ok {
			return nil, fmt.Errorf("DeviceClass %s not found", sub.DeviceClassName)
		}
		count := int64(1)
		if sub.AllocationMode == resourceapi.DeviceAllocationModeExactCount || sub.AllocationMode == "" {
			count = max(sub.Count, 1)
		}
		if least == nil {
			least, key = &resourceapi.ExactDeviceRequest{DeviceClassName: sub.DeviceClassName, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}, Key(class)
		} else if Key(class) != key {
			return nil, nil
		}
		least.Count = min(least.Count, count)
		least.Tolerations = append(least.Tolerations, sub.Tolerations...)
	}
	return least, nil
}

func (c *Catalog) load() error {
	if c.loaded {
		return c.loadErr
	}
	c.loaded = true
	if c.loadErr = c.loadClasses(); c.loadErr != nil {
		return c.loadErr
	}
	if c.r == nil || c.r.dra == nil {
		return nil
	}
	slices, err := c.r.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		c.loadErr = err
		return err
	}
	c.slices = slices
	c.sliceOf = map[string][]*resourceapi.ResourceSlice{}
	for _, slice := range slices {
		if name := ptr.Deref(slice.Spec.NodeName, ""); name != "" && !ptr.Deref(slice.Spec.PerDeviceNodeSelection, false) {
			c.sliceOf[name] = append(c.sliceOf[name], slice)
		} else {
			c.anyNode = append(c.anyNode, slice)
		}
	}
	// Gathering can fail on a concurrent change: try again once.
	if c.allocated, c.loadErr = c.r.dra.ResourceClaims().GatherAllocatedState(); c.loadErr != nil {
		c.allocated, c.loadErr = c.r.dra.ResourceClaims().GatherAllocatedState()
	}
	return c.loadErr
}

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
		if _, ok := c.byKey[key]; ok {
			counts.Free[key], counts.Total[key] = 0, 0
		}
	}
	return counts
}

// FreeOn is, per device key in keys, how many devices of that class the
// node has free (see Counts).
func (c *Catalog) FreeOn(ctx context.Context, node *corev1.Node, keys []corev1.ResourceName) (capacity.Resources, error) {
	counts, err := c.CountOn(ctx, node, keys)
	return counts.Free, err
}

// CountOn counts the node's devices of the classes counted under keys
// (names no class is counted under are left out). A Catalog counts each
// node once: every call of one Catalog must ask for the same keys, as one
// check does.
func (c *Catalog) CountOn(ctx context.Context, node *corev1.Node, keys []corev1.ResourceName) (Counts, error) {
	if counts, ok := c.counts[node.Name]; ok {
		return counts, nil
	}
	if err := c.load(); err != nil {
		return Counts{}, err
	}
	counts := c.newCounts(keys)
	for _, slice := range c.sliceOf[node.Name] {
		if err := c.countSlice(ctx, node, slice, counts); err != nil {
			return Counts{}, err
		}
	}
	for _, slice := range c.anyNode {
		if err := c.countSlice(ctx, node, slice, counts); err != nil {
			return Counts{}, err
		}
	}
	c.counts[node.Name] = counts
	return counts, nil
}

// SharedOnce counts the devices of slices several nodes see once each,
// whichever nodes see them: what the nodes' SharedFree and SharedTotal
// are, in all. A device several claims may share counts once here.
func (c *Catalog) SharedOnce(ctx context.Context, keys []corev1.ResourceName) (Counts, error) {
	if err := c.load(); err != nil {
		return Counts{}, err
	}
	counts := c.newCounts(keys)
	for _, slice := range c.anyNode {
		if err := c.countSlice(ctx, nil, slice, counts); err != nil {
			return Counts{}, err
		}
	}
	return counts, nil
}

// countSlice adds the slice's devices the node sees (nil: every device
// several nodes see, once) to counts.
func (c *Catalog) countSlice(ctx context.Context, node *corev1.Node, slice *resourceapi.ResourceSlice, counts Counts) error {
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
		match, err := c.r.deviceMatches(ctx, c.byKey[key], slice)
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
		allocated := structured.IsDeviceAllocated(id, c.allocated)
		if shareable {
			allocated = c.allocated.AllocatedDevices.Has(id)
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
	return structured.NodeMatches(c.r.features, node, "", false, selector)
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

// Keys are the device keys among a demand's resources, in order.
func (c *Catalog) Keys(demand ...capacity.Resources) []corev1.ResourceName {
	set := map[corev1.ResourceName]bool{}
	for _, d := range demand {
		for name, v := range d {
			if v > 0 && !set[name] && c.IsDeviceKey(name) {
				set[name] = true
			}
		}
	}
	keys := make([]corev1.ResourceName, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
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

// Charge is what the pod's claims count for in its queue, per class key:
// an allocated claim the devices it was allocated (adminAccess ones
// excepted), a claim not allocated yet (or a template's, before the claim
// exists) an exact request its count, allocationMode All one device, a
// prioritized list its largest alternative, an adminAccess request
// nothing. Claims a class serves by extended resource are in the pod's
// requests, not its claims. Unlike Demand, a claim is charged whether or
// not it is allocated: it is what the pod holds, not what placing it
// takes. A claim several pods use is charged once (Pays): to the first pod
// its status.reservedFor lists. Errors (a claim, template or class
// missing) charge nothing for that claim.
func (r *Reader) Charge(pod *corev1.Pod) capacity.Resources {
	if len(pod.Spec.ResourceClaims) == 0 || r == nil || r.dra == nil {
		return nil
	}
	c := r.Catalog()
	if err := c.loadClasses(); err != nil {
		return nil
	}
	charge := capacity.Resources{}
	for _, ref := range pod.Spec.ResourceClaims {
		claim, spec := c.claimOf(pod, ref)
		if spec == nil || (claim != nil && !Pays(pod, claim)) {
			continue
		}
		if claim != nil && claim.Status.Allocation != nil {
			c.chargeAllocation(charge, claim)
			continue
		}
		for _, req := range spec.Devices.Requests {
			c.chargeRequest(charge, req)
		}
	}
	return charge
}

// Pays reports whether the pod is the one a claim it uses is charged to:
// the first pod the claim's status.reservedFor lists, or, while it is
// reserved for none, every pod asking for it (whichever is scheduled first
// allocates it; until then each one's admission must count it).
func Pays(pod *corev1.Pod, claim *resourceapi.ResourceClaim) bool {
	for _, consumer := range claim.Status.ReservedFor {
		if consumer.APIGroup == "" && consumer.Resource == "pods" {
			return consumer.UID == pod.UID
		}
	}
	return true
}

// claimOf resolves a pod's claim reference to its claim (nil before it is
// generated from its template) and spec (nil when neither exists).
func (c *Catalog) claimOf(pod *corev1.Pod, ref corev1.PodResourceClaim) (*resourceapi.ResourceClaim, *resourceapi.ResourceClaimSpec) {
	name := claimName(pod, ref)
	if name != "" {
		if claim, err := c.r.dra.ResourceClaims().Get(pod.Namespace, name); err == nil {
			return claim, &claim.Spec
		}
	}
	template := ptr.Deref(ref.ResourceClaimTemplateName, "")
	if template == "" || c.r.templates == nil {
		return nil, nil
	}
	t, err := c.r.templates.ResourceClaimTemplates(pod.Namespace).Get(template)
	if err != nil {
		return nil, nil
	}
	return nil, &t.Spec.Spec
}

// requestClass is the class of a claim's request by the name an
// allocation result gives it: "req", or "req/sub" for an alternative of a
// prioritized list.
func requestClass(spec *resourceapi.ResourceClaimSpec, name string) string {
	main, sub, _ := strings.Cut(name, "/")
	for _, req := range spec.Devices.Requests {
		if req.Name != main {
			continue
		}
		if req.Exactly != nil {
			return req.Exactly.DeviceClassName
		}
		for _, alt := range req.FirstAvailable {
			if alt.Name == sub {
				return alt.DeviceClassName
			}
		}
	}
	return ""
}

// chargeRequest charges a request of a claim not allocated yet.
func (c *Catalog) chargeRequest(charge capacity.Resources, req resourceapi.DeviceRequest) {
	count := func(mode resourceapi.DeviceAllocationMode, n int64) int64 {
		if mode == resourceapi.DeviceAllocationModeAll {
			return 1
		}
		return max(n, 1)
	}
	if exact := req.Exactly; exact != nil {
		if class, ok := c.classes[exact.DeviceClassName]; ok && !ptr.Deref(exact.AdminAccess, false) {
			charge[Key(class)] += count(exact.AllocationMode, exact.Count)
		}
		return
	}
	var largest int64
	var key corev1.ResourceName
	for _, alt := range req.FirstAvailable {
		class, ok := c.classes[alt.DeviceClassName]
		if n := count(alt.AllocationMode, alt.Count); ok && n > largest {
			largest, key = n, Key(class)
		}
	}
	if largest > 0 {
		charge[key] += largest
	}
}

// Totals are the cluster's devices per class, each class counted under its
// Key (devices matching several classes count in each), for the queues'
// shares; the caller must not change them. Recounted only when a ResourceSlice or DeviceClass changed: the
// queues ask on every change of demand.
func (r *Reader) Totals() capacity.Resources {
	if r == nil || r.dra == nil {
		return nil
	}
	classes, err := r.dra.DeviceClasses().List()
	if err != nil || len(classes) == 0 {
		return nil
	}
	slices, err := r.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		return nil
	}
	h := fnv.New64a()
	for _, s := range slices {
		_, _ = h.Write([]byte(s.Name + "@" + s.ResourceVersion + "," + strconv.Itoa(len(s.Spec.Devices)) + ";"))
	}
	for _, c := range classes {
		_, _ = h.Write([]byte(c.Name + "@" + c.ResourceVersion + ";"))
	}
	version := h.Sum64()
	r.totalsMu.Lock()
	defer r.totalsMu.Unlock()
	if r.totals != nil && version == r.totalsOf {
		return r.totals
	}
	r.forgetVerdicts(slices, classes)
	totals := capacity.Resources{}
	for _, class := range classes {
		key := Key(class)
		for _, s := range slices {
			// A class whose selector does not compile counts no devices.
			match, _ := r.deviceMatches(context.Background(), class, s)
			for _, m := range match {
				if m {
					totals[key]++
				}
			}
		}
	}
	r.totalsOf, r.totals = version, totals
	return totals
}

// Held is what the pod's claims still hold once the pod is done: per
// claim still allocated that the pod Pays for (as namespace/name),
// including the one the scheduler made for its DRA-backed extended
// resources, its devices per class key. Devices are free when the
// resourceclaim controller deallocates a claim, not when its pod exits.
func (r *Reader) Held(pod *corev1.Pod) map[string]capacity.Resources {
	held := map[string]capacity.Resources{}
	r.eachHeld(pod, func(claim *resourceapi.ResourceClaim) bool { return Pays(pod, claim) }, func(key string, _ *resourceapi.ResourceClaim, devices capacity.Resources) {
		held[key] = devices
	})
	return held
}

// Released is what evicting the pod gives back once its claims are
// deallocated: the devices of its allocated claims whose every consumer
// (status.reservedFor) leaves too, and those claims (as namespace/name).
// A claim another pod keeps using stays allocated.
func (r *Reader) Released(pod *corev1.Pod, leaving func(types.UID) bool) (claims []string, released capacity.Resources) {
	return r.heldIf(pod, leavesWith(pod, leaving))
}

// ReleasedDevices is the devices Released counts, by ID, for an allocator
// to see free. A device allocated to be shared (a share of its consumable
// capacity) is left out: the allocator keeps counting it as used, which
// errs towards evicting nothing rather than evicting in vain. So is one
// allocated for admin access, which took no device.
func (r *Reader) ReleasedDevices(pod *corev1.Pod, leaving func(types.UID) bool) []structured.DeviceID {
	var ids []structured.DeviceID
	r.eachHeld(pod, leavesWith(pod, leaving), func(_ string, claim *resourceapi.ResourceClaim, _ capacity.Resources) {
		for _, result := range claim.Status.Allocation.Devices.Results {
			if result.ShareID == nil && !ptr.Deref(result.AdminAccess, false) {
				ids = append(ids, structured.MakeDeviceID(result.Driver, result.Pool, result.Device))
			}
		}
	})
	return ids
}

// leavesWith says whether a claim of the pod is deallocated when the pod
// and the pods leaving says leave: every consumer it is reserved for
// leaves.
func leavesWith(pod *corev1.Pod, leaving func(types.UID) bool) func(*resourceapi.ResourceClaim) bool {
	return func(claim *resourceapi.ResourceClaim) bool {
		for _, consumer := range claim.Status.ReservedFor {
			if consumer.UID != pod.UID && !leaving(consumer.UID) {
				return false
			}
		}
		return true
	}
}

// heldIf is the pod's allocated claims that keep says count, and their
// devices summed.
func (r *Reader) heldIf(pod *corev1.Pod, keep func(*resourceapi.ResourceClaim) bool) (claims []string, held capacity.Resources) {
	r.eachHeld(pod, keep, func(key string, _ *resourceapi.ResourceClaim, devices capacity.Resources) {
		claims = append(claims, key)
		if held == nil {
			held = capacity.Resources{}
		}
		held.Add(devices)
	})
	return claims, held
}

// eachHeld calls found with each of the pod's allocated claims that keep
// says count (as namespace/name, and the claim) and the devices it holds.
func (r *Reader) eachHeld(pod *corev1.Pod, keep func(*resourceapi.ResourceClaim) bool, found func(key string, claim *resourceapi.ResourceClaim, devices capacity.Resources)) {
	if r == nil || r.dra == nil {
		return
	}
	var names []string
	for _, ref := range pod.Spec.ResourceClaims {
		if name := claimName(pod, ref); name != "" {
			names = append(names, name)
		}
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil && st.ResourceClaimName != "" {
		names = append(names, st.ResourceClaimName)
	}
	if len(names) == 0 {
		return
	}
	c := r.Catalog()
	if err := c.loadClasses(); err != nil {
		return
	}
	for _, name := range names {
		claim, err := r.dra.ResourceClaims().Get(pod.Namespace, name)
		if err != nil || claim.Status.Allocation == nil || !keep(claim) {
			continue
		}
		devices := capacity.Resources{}
		c.chargeAllocation(devices, claim)
		found(pod.Namespace+"/"+name, claim, devices)
	}
}

// chargeAllocation charges the devices an allocated claim holds, but
// those of adminAccess requests.
func (c *Catalog) chargeAllocation(charge capacity.Resources, claim *resourceapi.ResourceClaim) {
	for _, result := range claim.Status.Allocation.Devices.Results {
		if class, ok := c.classes[requestClass(&claim.Spec, result.Request)]; ok && !ptr.Deref(result.AdminAccess, false) {
			charge[Key(class)]++
		}
	}
}

// StillAllocated reports whether the scheduler's DRA state shows the claim
// allocated.
func (r *Reader) StillAllocated(namespace, name string) bool {
	if r == nil || r.dra == nil {
		return false
	}
	claim, err := r.dra.ResourceClaims().Get(namespace, name)
	return err == nil && claim.Status.Allocation != nil
}

// ClaimFreed reports whether a claim event (old and new objects as the
// informer gives them, nil where there is none) frees devices: an
// allocated claim deallocated or deleted.
func ClaimFreed(oldObj, newObj interface{}) bool {
	oldClaim, _ := oldObj.(*resourceapi.ResourceClaim)
	if oldClaim == nil || oldClaim.Status.Allocation == nil {
		return false
	}
	newClaim, _ := newObj.(*resourceapi.ResourceClaim)
	return newClaim == nil || newClaim.Status.Allocation == nil
}

// ClaimAllocated reports whether a claim update allocated it.
func ClaimAllocated(oldObj, newObj interface{}) bool {
	oldClaim, _ := oldObj.(*resourceapi.ResourceClaim)
	newClaim, _ := newObj.(*resourceapi.ResourceClaim)
	return oldClaim != nil && newClaim != nil && oldClaim.Status.Allocation == nil && newClaim.Status.Allocation != nil
}

// Asks names a DeviceClass whose devices the pods ask for (by claim, or
// by an extended resource the class serves), or "".
func (r *Reader) Asks(pods []*corev1.Pod) string {
	if r == nil || r.dra == nil {
		return ""
	}
	c := r.Catalog()
	for _, pod := range pods {
		for _, ref := range pod.Spec.ResourceClaims {
			_, spec := c.claimOf(pod, ref)
			if spec == nil {
				continue
			}
			for _, req := range spec.Devices.Requests {
				if req.Exactly != nil {
					return req.Exactly.DeviceClassName
				}
				if len(req.FirstAvailable) > 0 {
					return req.FirstAvailable[0].DeviceClassName
				}
			}
		}
		if keys := c.Keys(capacity.Request(pod)); len(keys) > 0 {
			return c.ClassOf(keys[0])
		}
	}
	return ""
}
