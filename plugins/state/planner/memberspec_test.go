package planner

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// memberSpec judges a pod's own node selector, required affinity and
// tolerations as NodeUnschedulable, NodeAffinity and TaintToleration do.
func TestMemberSpecAllows(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	node := func() *st.NodeWrapper { return st.MakeNode().Name("n").Label("zone", "a") }
	plain := st.MakePod().Name("p").Obj()
	inZoneB := st.MakePod().Name("b").NodeSelector(map[string]string{"zone": "b"}).Obj()
	requiresA := st.MakePod().Name("r").NodeAffinityIn("zone", []string{"a"}, st.NodeSelectorTypeMatchExpressions).Obj()
	tolerating := st.MakePod().Name("t").Toleration("nvidia.com/gpu").Obj()
	cordonTolerating := st.MakePod().Name("c").Obj()
	cordonTolerating.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		want bool
	}{
		{name: "no constraints", pod: plain, node: node().Obj(), want: true},
		{name: "node selector of another zone", pod: inZoneB, node: node().Obj(), want: false},
		{name: "required affinity matched", pod: requiresA, node: node().Obj(), want: true},
		{name: "NoSchedule taint not tolerated", pod: plain, node: node().Taints([]corev1.Taint{gpuTaint}).Obj(), want: false},
		{name: "NoSchedule taint tolerated", pod: tolerating, node: node().Taints([]corev1.Taint{gpuTaint}).Obj(), want: true},
		{name: "PreferNoSchedule taint is no filter", pod: plain, node: node().Taints([]corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}).Obj(), want: true},
		{name: "cordoned", pod: plain, node: node().Unschedulable(true).Obj(), want: false},
		{name: "cordoned, tolerated", pod: cordonTolerating, node: node().Unschedulable(true).Obj(), want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, specOf(tc.pod).Allows(tc.node))
		})
	}
}
