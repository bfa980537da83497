package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// LatestOrGone hands an added or updated object to latest (as it is now)
// and a deleted one to gone, tombstone or not, which Unwrap opens.
func TestLatestOrGone(t *testing.T) {
	pod := func(rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: rv}}
	}
	var latest, gone []string
	h := LatestOrGone(func(obj interface{}) { latest = append(latest, obj.(*corev1.Pod).ResourceVersion) },
		func(obj interface{}) { gone = append(gone, Unwrap(obj).(*corev1.Pod).ResourceVersion) })
	h.OnAdd(pod("1"), false)
	h.OnUpdate(pod("1"), pod("2"))
	h.OnDelete(pod("3"))
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod("4")})
	assert.Equal(t, []string{"1", "2"}, latest, "an update hands over the object as it is now")
	assert.Equal(t, []string{"3", "4"}, gone, "a missed deletion's tombstone is opened")
	assert.Equal(t, "x", Unwrap("x"), "anything else is itself")
}
