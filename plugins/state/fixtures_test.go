package state

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// trackedStore is a Store whose pod informer runs on a fake watch, with
// the handler New registers: events reach it as the apiserver's would.
func trackedStore(t *testing.T) (*Store, *watch.FakeWatcher) {
	t.Helper()
	w := watch.NewFake()
	s := &Store{now: time.Now, gangs: map[GroupKey]*Gang{}, placing: map[GroupKey]*Gang{}, groupTimes: map[GroupKey]time.Time{},
		bound: map[GroupKey]map[types.UID]bool{}, live: map[GroupKey]map[types.UID]bool{},
		departed: map[GroupKey]map[types.UID]time.Time{}}
	s.pods = cache.NewSharedIndexInformer(listThenWatch{&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return w, nil },
	}}, &corev1.Pod{}, 0, cache.Indexers{})
	require.NoError(t, tracker{s}.trackPods())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.succeeded, s.failed = idleMetadataInformer(ctx), idleMetadataInformer(ctx)
	go s.pods.RunWithContext(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), s.podsTracked.HasSynced, s.succeeded.HasSynced, s.failed.HasSynced))
	return s, w
}

// idleMetadataInformer is a running informer of pod metadata, indexed by
// group, whose list is empty and whose watch sends nothing: a test adds
// to its indexer what the apiserver would show.
func idleMetadataInformer(ctx context.Context) cache.SharedIndexInformer {
	informer := cache.NewSharedIndexInformer(listThenWatch{&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}}, &metav1.PartialObjectMetadata{}, 0, cache.Indexers{podGroupIndex: indexByGroup})
	go informer.RunWithContext(ctx)
	return informer
}

// listThenWatch lists, then watches: the fake watch sends no initial
// events, so the reflector must not stream its list from the watch.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }
