package devices

import (
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
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
