package preemption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// A unit of a gang (a cpu leader beside GPU workers on two nodes) is as
// important as its most important member and as young as its newest; it
// gives back what its members request together; it is listed once per
// node it touches.
func TestUnitOfAMixedGang(t *testing.T) {
	started := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	pod := func(name string, priority int32, req map[corev1.ResourceName]string, startedAt time.Duration) *corev1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Priority(priority).Req(req).Obj()
		p.Status.StartTime = &metav1.Time{Time: started.Add(startedAt)}
		return p
	}
	leader := pod("leader", 100, map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "4Gi"}, 0)
	w0 := pod("w0", 50, map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", "nvidia.com/gpu": "8"}, time.Minute)
	w1 := pod("w1", 50, map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", "nvidia.com/gpu": "8"}, 2*time.Minute)
	candidate := func(p *corev1.Pod, node string) found {
		info, err := framework.NewPodInfo(p)
		require.NoError(t, err)
		return found{member: member{info: info, node: node}, queue: "train", eligible: true}
	}
	w := &world{}
	gang := w.newUnit([]found{candidate(leader, "gpu-1"), candidate(w0, "gpu-1"), candidate(w1, "gpu-2")}, true)
	assert.Equal(t, int32(100), gang.priority, "the most important member's priority")
	assert.Equal(t, started.Add(2*time.Minute), gang.newest)
	assert.Equal(t, "train", gang.queue)
	assert.False(t, gang.protected, "no budget")
	gives := gang.request()
	assert.Equal(t, int64(18000), gives[corev1.ResourceCPU])
	assert.Equal(t, int64(16), gives["nvidia.com/gpu"])
	assert.Equal(t, int64(68<<30), gives[corev1.ResourceMemory])
	assert.Len(t, gang.memberRequests(), 3)

	single := w.newUnit([]found{candidate(pod("single", 10, map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"}, 0), "gpu-2")}, false)
	byNode := unitsByNode([]*unit{gang, single})
	assert.Equal(t, []*unit{gang}, byNode["gpu-1"], "listed once though two members run there")
	assert.Equal(t, []*unit{gang, single}, byNode["gpu-2"])
	assert.True(t, gang.touchesAny(map[string]bool{"gpu-2": true}))
	assert.False(t, single.touchesAny(map[string]bool{"gpu-1": true}))

	node := framework.NewNodeInfo(leader, w0)
	assert.Equal(t, "w0", podOn(node, "w0").GetPod().Name)
	assert.Nil(t, podOn(node, "w1"))
	assert.Nil(t, podOn(nil, "w0"))
}
