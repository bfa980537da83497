package devices

import (
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/structured"
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

// Catalog is one plan's working state over a View: what its pods demand
// (a claim counted once, for the first pod that references it), the
// tolerations their requests carry, each node's counts once counted, the
// claims the allocator must still allocate. Not safe for concurrent use:
// each plan makes its own (View.Catalog), and plans over one View run in
// parallel.
type Catalog struct {
	v *View
	// seen: claims already counted, by namespace/name.
	seen map[string]bool
	// unallocatedUsers: the pods of the check referencing each claim that
	// exists and is not allocated, by namespace/name (see SharedUnallocated).
	unallocatedUsers map[string][]string
	// tolerations per key: what the demanding requests tolerate.
	tolerations map[corev1.ResourceName][]resourceapi.DeviceToleration
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
	// heldClaims are, per node, the claims of other gangs' members planned
	// there (see Hold).
	heldClaims   map[string][]*resourceapi.ResourceClaim
	allocator    structured.Allocator
	allocatorErr error
}

// Catalog starts a plan's working state over the view (nil: no DRA).
func (v *View) Catalog() *Catalog {
	return &Catalog{v: v, seen: map[string]bool{}, unallocatedUsers: map[string][]string{}, tolerations: map[corev1.ResourceName][]resourceapi.DeviceToleration{}, counts: map[string]Counts{},
		demandOf: map[types.UID]capacity.Resources{}, claimsOf: map[types.UID][]*resourceapi.ResourceClaim{}, partitioned: map[string]bool{}}
}

// View is what the catalog reads.
func (c *Catalog) View() *View { return c.v }
