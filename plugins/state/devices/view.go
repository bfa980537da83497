package devices

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// View is what one check reads of DRA, read before the check starts and
// never changed after: the device classes, the claims and claim templates
// of the pods it was read for, and, when those pods ask for devices, the
// published slices, the allocated state and each class's verdict on each
// slice's devices. It reads no lister and holds no lock, so any number of
// goroutines may plan over one View; each plan counts and allocates in a
// Catalog of its own (View.Catalog). A nil View is one of a scheduler
// without DRA: no class, no device.
type View struct {
	classes map[string]*resourceapi.DeviceClass
	byKey   map[corev1.ResourceName]*resourceapi.DeviceClass
	list    []*resourceapi.DeviceClass

	claims    map[string]Read[*resourceapi.ResourceClaim]
	templates map[string]Read[*resourceapi.ResourceClaimTemplate]

	// sliceOf are the slices published for one node by name; anyNode the
	// others (all nodes, a node selector, or per-device node selection),
	// which every node must look at.
	sliceOf   map[string][]*resourceapi.ResourceSlice
	anyNode   []*resourceapi.ResourceSlice
	slices    []*resourceapi.ResourceSlice
	allocated *structured.AllocatedState
	verdicts  map[SliceClass][]bool

	features structured.Features
	cel      *cel.Cache
	// err is why the view could not be read whole (a lister failed).
	err error
}

// Read is one object as a lister returned it: the object, or the error
// (NotFound for one that does not exist).
type Read[T any] struct {
	Object T
	Err    error
}

// SliceClass names one class's verdict on one slice's devices.
type SliceClass struct{ Slice, Class string }

// Source is what a View is made of, as the DRA reader read it.
type Source struct {
	Classes []*resourceapi.DeviceClass
	// Claims and Templates are by namespace/name, every one the pods of
	// the check reference (their generated claims by the pods' status).
	Claims    map[string]Read[*resourceapi.ResourceClaim]
	Templates map[string]Read[*resourceapi.ResourceClaimTemplate]
	// Verdicts are, per slice and class of the keys the check counts,
	// whether the class's selectors match each of the slice's devices (by
	// index). Slices and Allocated are read when the check counts a key.
	Slices    []*resourceapi.ResourceSlice
	Allocated *structured.AllocatedState
	Verdicts  map[SliceClass][]bool
	Features  structured.Features
	CEL       *cel.Cache
	Err       error
}

// NewView indexes what was read.
func NewView(src Source) *View {
	v := &View{
		classes: make(map[string]*resourceapi.DeviceClass, len(src.Classes)), byKey: make(map[corev1.ResourceName]*resourceapi.DeviceClass, 2*len(src.Classes)),
		list: src.Classes, claims: src.Claims, templates: src.Templates,
		slices: src.Slices, allocated: src.Allocated, verdicts: src.Verdicts, features: src.Features, cel: src.CEL, err: src.Err,
	}
	for _, class := range src.Classes {
		v.classes[class.Name] = class
		key := Key(class)
		// Two classes naming one extended resource: the scheduler picks
		// one too; keep the older, as its resolver does.
		if old, ok := v.byKey[key]; !ok || class.CreationTimestamp.Before(&old.CreationTimestamp) {
			v.byKey[key] = class
		}
		v.byKey[corev1.ResourceName(resourceapi.ResourceDeviceClassPrefix+class.Name)] = class
	}
	v.sliceOf = map[string][]*resourceapi.ResourceSlice{}
	for _, slice := range src.Slices {
		if name := ptr.Deref(slice.Spec.NodeName, ""); name != "" && !ptr.Deref(slice.Spec.PerDeviceNodeSelection, false) {
			v.sliceOf[name] = append(v.sliceOf[name], slice)
		} else {
			v.anyNode = append(v.anyNode, slice)
		}
	}
	return v
}

// Err is why the view could not be read whole, if it could not: every
// count and allocation then fails with it.
func (v *View) Err() error {
	if v == nil {
		return nil
	}
	return v.err
}

// ClassNamed is the class of that name, if the view holds it.
func (v *View) ClassNamed(name string) (*resourceapi.DeviceClass, bool) {
	if v == nil {
		return nil, false
	}
	class, ok := v.classes[name]
	return class, ok
}

// classKeyed is the class counted under key (its Key or its implicit
// name).
func (v *View) classKeyed(key corev1.ResourceName) (*resourceapi.DeviceClass, bool) {
	if v == nil {
		return nil, false
	}
	class, ok := v.byKey[key]
	return class, ok
}

// IsDeviceKey reports whether name counts devices of a class.
func (v *View) IsDeviceKey(name corev1.ResourceName) bool {
	_, ok := v.classKeyed(name)
	return ok
}

// ClassKeys are the keys every DeviceClass's devices count under, sorted,
// each once.
func (v *View) ClassKeys() []corev1.ResourceName {
	if v == nil {
		return nil
	}
	seen := make(map[corev1.ResourceName]bool, len(v.classes))
	keys := make([]corev1.ResourceName, 0, len(v.classes))
	for _, class := range v.classes {
		if key := Key(class); !seen[key] {
			seen[key] = true
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

// ClassOf names the class counted under key, for messages.
func (v *View) ClassOf(key corev1.ResourceName) string {
	if class, ok := v.classKeyed(key); ok {
		return class.Name
	}
	return string(key)
}

// Keys are the device keys among a demand's resources, in order.
func (v *View) Keys(demand ...capacity.Resources) []corev1.ResourceName {
	set := map[corev1.ResourceName]bool{}
	for _, d := range demand {
		for name, n := range d {
			if n > 0 && !set[name] && v.IsDeviceKey(name) {
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

// Requests are the pod's requests (capacity.Request) with a device class
// asked for by its implicit name, deviceclass.resource.kubernetes.io/<class>,
// counted under the class's Key: a pod asking that way for a class whose
// extendedResourceName is example.com/gpu is charged, capped and placed
// as one asking for example.com/gpu. An implicit name of no class stays
// as it is (nothing serves it; the pod does not fit).
func (v *View) Requests(pod *corev1.Pod) capacity.Resources {
	return RequestsWith(pod, v.ClassNamed)
}

// RequestsWith is View.Requests with the classes looked up by classNamed.
func RequestsWith(pod *corev1.Pod, classNamed func(string) (*resourceapi.DeviceClass, bool)) capacity.Resources {
	requests := capacity.Request(pod)
	var renamed capacity.Resources
	for name, n := range requests {
		className, implicit := strings.CutPrefix(string(name), resourceapi.ResourceDeviceClassPrefix)
		if !implicit {
			continue
		}
		class, ok := classNamed(className)
		if !ok || class == nil || Key(class) == name {
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

// CountMatching counts, per key of keys, the devices of ids the class
// counted under that key matches: the devices an eviction frees, under
// every class that could use them, whichever class their claims asked by
// (a victim's devices of gpu.example.com serve a preemptor asking by the
// narrower h100.example.com where they are h100s). A device no slice
// publishes any more counts nowhere.
func (v *View) CountMatching(ids []structured.DeviceID, keys []corev1.ResourceName) (capacity.Resources, error) {
	if err := v.Err(); err != nil {
		return nil, err
	}
	counts := capacity.Resources{}
	if len(ids) == 0 {
		for _, key := range keys {
			if v.IsDeviceKey(key) {
				counts[key] = 0
			}
		}
		return counts, nil
	}
	wanted := make(map[structured.DeviceID]bool, len(ids))
	for _, id := range ids {
		wanted[id] = true
	}
	for _, key := range keys {
		class, ok := v.classKeyed(key)
		if !ok {
			continue
		}
		counts[key] = 0
		for _, slice := range v.slices {
			match, err := v.matches(class, slice)
			if err != nil {
				return nil, err
			}
			for i := range slice.Spec.Devices {
				if match[i] && wanted[structured.MakeDeviceID(slice.Spec.Driver, slice.Spec.Pool.Name, slice.Spec.Devices[i].Name)] {
					counts[key]++
				}
			}
		}
	}
	return counts, nil
}

// GivenBack is what a pod that ends gives back on its node, for a check
// counting the device keys keys: gives (its requests and pod slot), but
// under each key the node does not serve from allocatable, the devices of
// its claims that end with it (freed, by ID), counted under every key
// whose class matches them, whichever class the claims named, instead of
// what it asked by (a DRA-backed extended resource is its claim's
// devices). A node that has the key in allocatable serves it by device
// plugin: there the request is what it gives back. On an error the
// devices count nowhere.
func (v *View) GivenBack(gives capacity.Resources, freed []structured.DeviceID, keys []corev1.ResourceName, inAllocatable func(corev1.ResourceName) bool) (capacity.Resources, error) {
	out := gives.Clone()
	if out == nil {
		out = capacity.Resources{}
	}
	released, err := v.CountMatching(freed, keys)
	for _, key := range keys {
		if inAllocatable(key) {
			continue
		}
		delete(out, key)
		if n := released[key]; n > 0 {
			out[key] = n
		}
	}
	return out, err
}

// matches is, per device of the slice, whether the class's selectors
// match it, as read for the view.
func (v *View) matches(class *resourceapi.DeviceClass, slice *resourceapi.ResourceSlice) ([]bool, error) {
	match, ok := v.verdicts[SliceClass{Slice: slice.Name, Class: class.Name}]
	if !ok || len(match) != len(slice.Spec.Devices) {
		return nil, fmt.Errorf("DeviceClass %s: its devices were not read for this check", class.Name)
	}
	return match, nil
}

// claimNamed is the claim namespace/name as read for the view.
func (v *View) claimNamed(namespace, name string) (*resourceapi.ResourceClaim, error) {
	read, ok := v.claims[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
	}
	return read.Object, read.Err
}

// templateNamed is the claim template namespace/name as read for the view.
func (v *View) templateNamed(namespace, name string) (*resourceapi.ResourceClaimTemplate, error) {
	read, ok := v.templates[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaimtemplates"), name)
	}
	return read.Object, read.Err
}

// classLister serves the view's classes to the structured allocator.
type classLister struct{ v *View }

func (l classLister) List() ([]*resourceapi.DeviceClass, error) { return l.v.list, nil }

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if class, ok := l.v.ClassNamed(name); ok {
		return class, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// newAllocator builds a structured allocator over the view's slices and
// classes, with state as what is allocated.
func newAllocator(ctx context.Context, v *View, state structured.AllocatedState) (structured.Allocator, error) {
	return structured.NewAllocator(ctx, v.features, state, classLister{v}, v.slices, v.cel)
}

// ClaimNames are the names of the claims the pod's references resolve to
// (its own, and those generated from its templates as its status records
// them), then the claim the scheduler made for its DRA-backed extended
// resources; and the templates its references name. What a View for the
// pod must read.
func ClaimNames(pod *corev1.Pod) (claims, templates []string) {
	for _, ref := range pod.Spec.ResourceClaims {
		if name := claimName(pod, ref); name != "" {
			claims = append(claims, name)
		}
		if t := ptr.Deref(ref.ResourceClaimTemplateName, ""); t != "" {
			templates = append(templates, t)
		}
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil && st.ResourceClaimName != "" {
		claims = append(claims, st.ResourceClaimName)
	}
	return claims, templates
}
