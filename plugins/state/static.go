package state

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

// NewStatic returns a Store over fixed PodGroups and pods, not connected to
// any apiserver: for unit tests of the plugins that read it.
func NewStatic(groups []*schedv1alpha1.PodGroup, pods []*corev1.Pod) *Store {
	s := &Store{now: time.Now, gangs: map[GroupKey]*Gang{}, placing: map[GroupKey]*Gang{}, groupTimes: map[GroupKey]time.Time{}}
	s.podGroups = cache.NewSharedIndexInformer(&cache.ListWatch{}, &schedv1alpha1.PodGroup{}, 0, cache.Indexers{})
	s.pods = cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{podGroupIndex: indexByGroup})
	for _, g := range groups {
		_ = s.podGroups.GetIndexer().Add(g)
	}
	s.succeeded = cache.NewSharedIndexInformer(&cache.ListWatch{}, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{podGroupIndex: indexByGroup})
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded {
			// As the apiserver shows it: gone from the scheduler's pod
			// informer, present in the store's succeeded one.
			_ = s.succeeded.GetIndexer().Add(&metav1.PartialObjectMetadata{ObjectMeta: p.ObjectMeta})
			continue
		}
		_ = s.pods.GetIndexer().Add(p)
	}
	return s
}

// WithDevices makes a static Store read devices through r: for unit tests
// of the checks that count them.
func WithDevices(s *Store, r *dra.Reader) *Store {
	s.devices = r
	return s
}
