package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// A static Store shows its pods as the apiserver would: a member that
// Succeeded is gone from the scheduler's pods but still counts toward
// minMember; the others are members; a PodGroup is found by its key.
func TestNewStaticShowsPodsAsTheApiserverDoes(t *testing.T) {
	key := GroupKey{Namespace: "ns", Name: "g"}
	group := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}}
	for _, tc := range []struct {
		name        string
		pods        []*corev1.Pod
		wantMembers []string
		wantCount   int
	}{
		{name: "no pods", wantCount: 0},
		{name: "pending and running members", pods: []*corev1.Pod{groupMember("leader", 2000, "n1", corev1.PodRunning), groupMember("worker", 500, "", "")}, wantMembers: []string{"leader", "worker"}, wantCount: 2},
		{name: "a member that succeeded counts, unseen", pods: []*corev1.Pod{groupMember("leader", 2000, "n1", corev1.PodRunning), groupMember("done", 500, "n1", corev1.PodSucceeded)}, wantMembers: []string{"leader"}, wantCount: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStatic([]*schedv1alpha1.PodGroup{group}, tc.pods)
			var names []string
			for _, p := range s.Members(key) {
				names = append(names, p.Name)
			}
			assert.ElementsMatch(t, tc.wantMembers, names)
			assert.Equal(t, tc.wantCount, s.MemberCount(key))
			assert.Equal(t, group, s.PodGroup(key))
			assert.Nil(t, s.PodGroup(GroupKey{Namespace: "ns", Name: "other"}))
		})
	}
}
