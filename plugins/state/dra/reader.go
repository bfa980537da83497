package dra

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
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
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
)

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
	verdicts map[devices.SliceClass]classVerdict
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

// View reads what a check of the pods needs, before it starts: the
// device classes, the pods' claims and claim templates, and, when the
// pods ask for devices (by claim, or by an extended resource a class
// serves) or counted names device keys, the slices, the allocated state
// and the verdicts of the classes counted under those keys. A Reader of
// a scheduler without DRA gives an empty view.
func (r *Reader) View(ctx context.Context, pods []*corev1.Pod, counted ...corev1.ResourceName) *devices.View {
	src := r.claimsSource(pods)
	if src.Err != nil || r == nil || r.dra == nil {
		return devices.NewView(src)
	}
	first := devices.NewView(src)
	asked := make([]capacity.Resources, 0, 2*len(pods)+1)
	catalog := first.Catalog()
	for _, pod := range pods {
		demand, err := catalog.Demand(pod)
		if err != nil {
			// Demand says so again, in the check that asks.
			continue
		}
		asked = append(asked, first.Requests(pod), demand)
	}
	allocates := catalog.Allocates()
	extra := capacity.Resources{}
	for _, key := range counted {
		extra[key] = 1
	}
	keys := first.Keys(append(asked, extra)...)
	if len(keys) == 0 && !allocates {
		return first
	}
	slices, err := r.dra.ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		src.Err = err
		return devices.NewView(src)
	}
	// Gathering can fail on a concurrent change: try again once.
	allocated, err := r.dra.ResourceClaims().GatherAllocatedState()
	if err != nil {
		allocated, err = r.dra.ResourceClaims().GatherAllocatedState()
	}
	if err != nil {
		src.Err = err
		return devices.NewView(src)
	}
	src.Slices, src.Allocated = slices, allocated
	src.Verdicts = make(map[devices.SliceClass][]bool, len(keys)*len(slices))
	for _, key := range keys {
		class, _ := first.ClassNamed(first.ClassOf(key))
		for _, slice := range slices {
			match, err := r.deviceMatches(ctx, class, slice)
			if err != nil {
				src.Err = err
				return devices.NewView(src)
			}
			src.Verdicts[devices.SliceClass{Slice: slice.Name, Class: class.Name}] = match
		}
	}
	return devices.NewView(src)
}

// Deallocating are the devices, by node, of the allocated claims whose
// every consumer is gone (live says which pods still run or are being
// placed): the resourceclaim controller deallocates them soon, so a plan
// of what frees once running pods end counts them free. A claim reserved
// for no pod yet (being placed) or allocated on no single node is left
// out, and so is a device allocated to be shared or for admin access
// (ReleasedDevices leaves those out too).
func (r *Reader) Deallocating(live func(types.UID) bool) map[string][]structured.DeviceID {
	if r == nil || r.dra == nil {
		return nil
	}
	claims, err := r.dra.ResourceClaims().List()
	if err != nil {
		return nil
	}
	var out map[string][]structured.DeviceID
	for _, claim := range claims {
		alloc := claim.Status.Allocation
		if alloc == nil || len(claim.Status.ReservedFor) == 0 {
			continue
		}
		gone := true
		for _, consumer := range claim.Status.ReservedFor {
			if live(consumer.UID) {
				gone = false
				break
			}
		}
		node := devices.NodeOfAllocation(alloc)
		if !gone || node == "" {
			continue
		}
		for _, result := range alloc.Devices.Results {
			if result.ShareID == nil && !ptr.Deref(result.AdminAccess, false) {
				if out == nil {
					out = map[string][]structured.DeviceID{}
				}
				out[node] = append(out[node], structured.MakeDeviceID(result.Driver, result.Pool, result.Device))
			}
		}
	}
	return out
}

// claimsSource reads the classes and what the pods' claim references
// resolve to.
func (r *Reader) claimsSource(pods []*corev1.Pod) devices.Source {
	if r == nil || r.dra == nil {
		return devices.Source{}
	}
	src := devices.Source{Features: r.features, CEL: r.cel}
	src.Classes, src.Err = r.dra.DeviceClasses().List()
	for _, pod := range pods {
		claims, templates := devices.ClaimNames(pod)
		for _, name := range claims {
			if src.Claims == nil {
				src.Claims = map[string]devices.Read[*resourceapi.ResourceClaim]{}
			}
			claim, err := r.dra.ResourceClaims().Get(pod.Namespace, name)
			src.Claims[pod.Namespace+"/"+name] = devices.Read[*resourceapi.ResourceClaim]{Object: claim, Err: err}
		}
		for _, name := range templates {
			if src.Templates == nil {
				src.Templates = map[string]devices.Read[*resourceapi.ResourceClaimTemplate]{}
			}
			read := devices.Read[*resourceapi.ResourceClaimTemplate]{Err: fmt.Errorf("no template lister")}
			if r.templates != nil {
				read.Object, read.Err = r.templates.ResourceClaimTemplates(pod.Namespace).Get(name)
			}
			src.Templates[pod.Namespace+"/"+name] = read
		}
	}
	return src
}

// claimsView is a view of the classes and the pods' claims alone: what
// charges and held devices are judged by.
func (r *Reader) claimsView(pods ...*corev1.Pod) *devices.View {
	if r == nil || r.dra == nil {
		return nil
	}
	return devices.NewView(r.claimsSource(pods))
}

// ClassKeys are the keys every DeviceClass's devices count under
// (devices.View.ClassKeys).
func (r *Reader) ClassKeys() []corev1.ResourceName {
	return r.claimsView().ClassKeys()
}

// Requests are the pod's requests with a class asked for by its implicit
// name counted under its Key (devices.View.Requests).
func (r *Reader) Requests(pod *corev1.Pod) capacity.Resources {
	if r == nil || r.dra == nil {
		return capacity.Request(pod)
	}
	return devices.RequestsWith(pod, func(name string) (*resourceapi.DeviceClass, bool) {
		class, err := r.dra.DeviceClasses().Get(name)
		return class, err == nil && class != nil
	})
}

// Charge is what the pod's claims count for in its queue
// (devices.View.Charge).
func (r *Reader) Charge(pod *corev1.Pod) capacity.Resources {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	return r.claimsView(pod).Charge(pod)
}

// Held is what the pod's claims still hold once the pod is done
// (devices.View.Held).
func (r *Reader) Held(pod *corev1.Pod) map[string]capacity.Resources {
	return r.claimsView(pod).Held(pod)
}

// Released is what evicting the pod gives back once its claims are
// deallocated (devices.View.Released).
func (r *Reader) Released(pod *corev1.Pod, leaving func(types.UID) bool) (claims []string, released capacity.Resources) {
	return r.claimsView(pod).Released(pod, leaving)
}

// ReleasedDevices is the devices Released counts, by ID
// (devices.View.ReleasedDevices).
func (r *Reader) ReleasedDevices(pod *corev1.Pod, leaving func(types.UID) bool) []structured.DeviceID {
	return r.claimsView(pod).ReleasedDevices(pod, leaving)
}

// Asks names a DeviceClass whose devices the pods ask for, or ""
// (devices.View.Asks).
func (r *Reader) Asks(pods []*corev1.Pod) string {
	return r.claimsView(pods...).Asks(pods)
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

// Totals are the cluster's devices per class, each class counted under its
// Key (devices matching several classes count in each), for the queues'
// shares; the caller must not change them. Recounted only when a
// ResourceSlice or DeviceClass changed: the queues ask on every change of
// demand.
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
		key := devices.Key(class)
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
