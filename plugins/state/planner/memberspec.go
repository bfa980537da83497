package planner

import (
	corev1 "k8s.io/api/core/v1"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// memberSpec is what a pod's own spec says of the nodes it may go on, as
// kube-scheduler's NodeUnschedulable, NodeAffinity and TaintToleration
// filters judge it: the gang's plan and preemption's simulation judge
// each member by its own, not by the member whose cycle runs (a leader
// pinned to other nodes than its workers). Parsed once per pod.
type memberSpec struct {
	affinity    nodeaffinity.RequiredNodeAffinity
	tolerations []corev1.Toleration
}

// specOf reads the pod's node selector, required node affinity and
// tolerations.
func specOf(pod *corev1.Pod) memberSpec {
	return memberSpec{affinity: nodeaffinity.GetRequiredNodeAffinity(pod), tolerations: pod.Spec.Tolerations}
}

// Allows reports whether the spec lets the pod onto the node: a cordoned
// node only with a toleration of node.kubernetes.io/unschedulable, the
// node selector and required affinity matched, and no NoSchedule or
// NoExecute taint it does not tolerate.
func (s memberSpec) Allows(node *corev1.Node) bool {
	if node.Spec.Unschedulable && !v1helper.TolerationsTolerateTaint(klog.Background(), s.tolerations, &corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, true) {
		return false
	}
	if ok, _ := s.affinity.Match(node); !ok {
		return false
	}
	_, untolerated := v1helper.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, s.tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, true)
	return !untolerated
}
