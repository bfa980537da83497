package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// A queue's refusal marks the pod's cycle and, in a pod-group cycle, the
// group's too, which is all PodGroupPostFilter gets.
func TestRefuseForQueue(t *testing.T) {
	tests := []struct {
		name     string
		inGroup  bool
		wantMark bool // on the group's cycle
	}{
		{name: "a pod's own cycle"},
		{name: "a member's cycle in a pod-group cycle", inGroup: true, wantMark: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cycle, group := framework.NewCycleState(), framework.NewCycleState()
			if tc.inGroup {
				cycle.SetPodGroupSchedulingCycle(group)
			}
			RefuseForQueue(cycle)
			_, err := cycle.Read(QueueRefusedKey)
			assert.NoError(t, err, "the pod's cycle is marked")
			_, err = group.Read(QueueRefusedKey)
			assert.Equal(t, tc.wantMark, err == nil, "the group's cycle is marked")
		})
	}
}
