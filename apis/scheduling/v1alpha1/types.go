package v1alpha1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// QueueLabel puts a pod (or, on a PodGroup or a namespace, all its pods) in
// a Queue.
const QueueLabel = "scheduling.flotilla.dev/queue"

// QueueOf is the queue a pod joins: its own QueueLabel, else its
// PodGroup's, else its namespace's, else the default queue. The labels of
// an object the pod lacks (no PodGroup) are nil.
func QueueOf(podLabels, podGroupLabels, namespaceLabels map[string]string, defaultQueue string) string {
	for _, labels := range []map[string]string{podLabels, podGroupLabels, namespaceLabels} {
		if name := labels[QueueLabel]; name != "" {
			return name
		}
	}
	return defaultQueue
}

// WaitsBefore orders what waits in a queue as the scheduler's queue takes
// it (the Gang plugin's queue sort): higher priority first, then the
// earlier (a gang's PodGroup creation, a pod's), then by name. Queue status
// positions and kubectl flotilla pending both follow it.
func WaitsBefore(aPriority int32, aSince time.Time, aName string, bPriority int32, bSince time.Time, bName string) bool {
	switch {
	case aPriority != bPriority:
		return aPriority > bPriority
	case !aSince.Equal(bSince):
		return aSince.Before(bSince)
	}
	return aName < bName
}

// Topology annotations on a scheduler-plugins PodGroup (an API flotilla
// does not own, so they are annotations), each naming a node label key:
//   - TopologyRequiredAnnotation: every member of the gang lands on nodes
//     that share one value of that label;
//   - TopologyPreferredAnnotation: one value of that label if any fits,
//     else the next wider level of the Gang plugin's topologyLevels, up to
//     the required level if one is set, else anywhere.
const (
	TopologyRequiredAnnotation  = "scheduling.flotilla.dev/topology-required"
	TopologyPreferredAnnotation = "scheduling.flotilla.dev/topology-preferred"
)

// Waiting annotations on a scheduler-plugins PodGroup, written by the
// scheduler (that API has no conditions, and a CRD the user may share with
// other tools prunes status fields it does not declare): while the gang
// waits with nothing of its quorum placing, WaitingReasonAnnotation is one
// reason of the fixed set (package apis/scheduling/reasons) and
// WaitingMessageAnnotation says why in numbers; both are removed when it
// stops waiting (its quorum is placing or placed, it finished, or it
// failed), so neither outlives what it says.
const (
	WaitingReasonAnnotation  = "scheduling.flotilla.dev/waiting-reason"
	WaitingMessageAnnotation = "scheduling.flotilla.dev/waiting-message"
)

// Queue is a share of the cluster: queues split what the cluster holds by
// weight, within each queue's guarantee and capability, level by level
// down the parent tree.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=fq
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=`.spec.weight`
// +kubebuilder:printcolumn:name="Parent",type=string,JSONPath=`.spec.parent`
// +kubebuilder:printcolumn:name="Deserved CPU",type=string,JSONPath=`.status.deserved.cpu`
// +kubebuilder:printcolumn:name="Allocated CPU",type=string,JSONPath=`.status.allocated.cpu`
// +kubebuilder:printcolumn:name="Deserved Mem",type=string,JSONPath=`.status.deserved.memory`
// +kubebuilder:printcolumn:name="Allocated Mem",type=string,JSONPath=`.status.allocated.memory`
// +kubebuilder:printcolumn:name="Deserved GPU",type=string,JSONPath=`.status.deserved.nvidia\.com/gpu`
// +kubebuilder:printcolumn:name="Allocated GPU",type=string,JSONPath=`.status.allocated.nvidia\.com/gpu`
// +kubebuilder:printcolumn:name="Usage CPU %",type=integer,JSONPath=`.status.usage.percent.cpu`,description="Percent of its pool the queue used over time (cpu)"
// +kubebuilder:printcolumn:name="Usage GPU %",type=integer,JSONPath=`.status.usage.percent.nvidia\.com/gpu`,description="Percent of its pool the queue used over time (nvidia.com/gpu)",priority=1
// +kubebuilder:printcolumn:name="Pending Gangs",type=integer,JSONPath=`.status.pendingGangs`,description="Gangs of the queue short of their quorum",priority=1
// +kubebuilder:printcolumn:name="Pending Pods",type=integer,JSONPath=`.status.pendingPods`,description="Pods of the queue in no gang, not yet placed",priority=1
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`
type Queue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   QueueSpec   `json:"spec,omitempty"`
	Status QueueStatus `json:"status,omitempty"`
}

// QueueSpec is what a queue is entitled to.
type QueueSpec struct {
	// Weight is the queue's share relative to its siblings.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	// +optional
	Weight int32 `json:"weight,omitempty"`
	// Guarantee is reserved for this queue: it deserves at least this much
	// of what it asks for, whatever the weights.
	// +optional
	Guarantee corev1.ResourceList `json:"guarantee,omitempty"`
	// Capability is a hard cap on what the queue may use. A resource that is
	// not listed is unlimited.
	// +optional
	Capability corev1.ResourceList `json:"capability,omitempty"`
	// Parent is the name of the queue this one splits; empty for a
	// top-level queue.
	// +optional
	Parent string `json:"parent,omitempty"`
	// Reclaimable lets other queues take back what this queue uses beyond
	// its deserved share. Default true.
	// +kubebuilder:default=true
	// +optional
	Reclaimable *bool `json:"reclaimable,omitempty"`
}

// QueueStatus is what the scheduler last computed for the queue.
type QueueStatus struct {
	// Deserved is the queue's current fair share.
	Deserved corev1.ResourceList `json:"deserved,omitempty"`
	// Allocated is what the queue's placed pods request, its descendants'
	// included: a parent's is the sum of its subtree's.
	Allocated corev1.ResourceList `json:"allocated,omitempty"`
	// Requested is allocated plus what its and its descendants' pending
	// pods request.
	Requested corev1.ResourceList `json:"requested,omitempty"`
	// RunningGangs counts gangs of the queue with their quorum placed.
	RunningGangs int32 `json:"runningGangs,omitempty"`
	// PendingGangs counts gangs of the queue still short of their quorum.
	PendingGangs int32 `json:"pendingGangs,omitempty"`
	// PendingPods counts the queue's own pods of no gang not yet placed
	// (not its descendants'). The status holds counts, never names: a
	// Queue is cluster-scoped and read by every tenant whose pods join it,
	// and a tenant lists its own waiting work with kubectl flotilla
	// pending -n, through its namespace's RBAC.
	PendingPods int32 `json:"pendingPods,omitempty"`
	// Usage is the queue's decayed use, kept while the scheduler's
	// Proportion plugin has usageHalfLife set; a restarted or new leader
	// seeds from it.
	// +optional
	Usage *QueueUsage `json:"usage,omitempty"`
	// Conditions: Valid says whether the spec can be honoured.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// QueueUsage is a queue's use over time: moving averages, with the
// scheduler's usageHalfLife, of what it held above its guarantee and of
// the pool it shared in (the cluster's, for a queue of no parent; its
// parent's deserved share below that). Allocated/Capacity is the fraction
// of its pool the queue used, recent use counting most.
type QueueUsage struct {
	// Allocated is the decayed average of what the queue (with its
	// descendants) held above its guarantee, per resource.
	Allocated corev1.ResourceList `json:"allocated,omitempty"`
	// Capacity is the decayed average of its pool, per resource.
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Percent is Allocated/Capacity per resource, in percent, rounded:
	// what bends the queue's deserved share.
	Percent map[corev1.ResourceName]int32 `json:"percent,omitempty"`
	// LastUpdate is when the averages were last advanced, to the
	// microsecond: a new leader folds the time since then in.
	LastUpdate metav1.MicroTime `json:"lastUpdate"`
}

// QueueList is a list of Queues.
//
// +kubebuilder:object:root=true
type QueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Queue `json:"items"`
}
