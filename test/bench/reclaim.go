package bench

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// watchReclaim times what a queue that becomes active waits for until it
// holds its share of n pods (Q2's breakdown): when the n-th of its pods
// was created (the Job controller), when the last victim taken from the
// other queues before that was marked for eviction (the scheduler's
// decision: its DisruptionTarget condition) and when it was gone (its
// grace period, the kubelet reporting it, the Job controller's
// finalizer), and when the queue's n-th pod was bound; and how many
// victims there were by then. Times are when the informer saw each, read
// by the returned function.
func (e *env) watchReclaim(queue string, n int) (func() (map[string]time.Time, int), error) {
	var mu sync.Mutex
	created, bound, marked, gone := map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	note := func(seen map[string]time.Time, pod string) {
		if _, ok := seen[pod]; !ok {
			seen[pod] = time.Now()
		}
	}
	ours := func(pod *corev1.Pod) bool {
		return strings.TrimPrefix(pod.Labels[queueLabel], e.namespace+"-") == queue
	}
	seen := func(obj interface{}, deleted bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ours(pod):
			note(created, pod.Name)
			if pod.Spec.NodeName != "" {
				note(bound, pod.Name)
			}
		case deleted:
			note(gone, pod.Name)
		default:
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.DisruptionTarget {
					note(marked, pod.Name)
				}
			}
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(e.namespace))
	informer := factory.Core().V1().Pods().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) { seen(obj, false) },
		DeleteFunc: func(obj interface{}) { seen(obj, true) },
	}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(e.ctx)
	e.tb.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// Added after the sync: the pods already there are not the queue's.
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj interface{}) {
		if pod, ok := obj.(*corev1.Pod); ok && ours(pod) {
			seen(obj, false)
		}
	}}); err != nil {
		return nil, err
	}
	return func() (map[string]time.Time, int) {
		mu.Lock()
		defer mu.Unlock()
		nth := func(seen map[string]time.Time) time.Time {
			times := make([]time.Time, 0, len(seen))
			for _, t := range seen {
				times = append(times, t)
			}
			slices.SortFunc(times, time.Time.Compare)
			if len(times) < n {
				return time.Time{}
			}
			return times[n-1]
		}
		share := nth(bound)
		last := func(seen map[string]time.Time) (time.Time, int) {
			var latest time.Time
			count := 0
			for _, t := range seen {
				if !t.After(share) {
					count++
					if t.After(latest) {
						latest = t
					}
				}
			}
			return latest, count
		}
		lastMarked, victims := last(marked)
		lastGone, _ := last(gone)
		return map[string]time.Time{"podsCreated": nth(created), "victimsMarked": lastMarked, "victimsGone": lastGone, "shareBound": share}, victims
	}, nil
}
