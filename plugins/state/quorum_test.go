package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// QuorumShort, what the pacer lets a held gang in for, counts bound,
// reserved and succeeded members, with or without accounting for the group.
func TestQuorumShort(t *testing.T) {
	pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 4}}
	reserved := groupMember("reserved", 1000, "", "")
	pods := []*corev1.Pod{groupMember("bound", 1000, "n1", corev1.PodRunning), groupMember("done", 1000, "n1", corev1.PodSucceeded), reserved, groupMember("a", 1000, "", "")}
	s := NewStatic([]*schedv1alpha1.PodGroup{pg}, pods)
	key := GroupKey{Namespace: "ns", Name: "g"}
	s.Lock(func(locked *Locked) {
		assert.Equal(t, 2, locked.QuorumShort(key, pg), "bound and succeeded count, without accounting")
		locked.ReserveMember(locked.Gang(key), reserved, "n2")
		assert.Equal(t, 1, locked.QuorumShort(key, pg), "and reserved")
	})
}
