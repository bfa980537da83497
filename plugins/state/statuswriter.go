package state

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// statusWriteErrors counts failed status writes by writer: a write that
// keeps failing (RBAC, an admission webhook, a schema the apiserver
// refuses) leaves users reading stale PodGroups and Queues, and is retried
// without end, so operators alert on it.
var statusWriteErrors = metrics.NewCounterVec(&metrics.CounterOpts{
	Namespace: "flotilla", Name: "status_write_errors_total",
	Help:           "Failed status writes, by writer (flotilla-podgroup-status, flotilla-queue-status); each is retried.",
	StabilityLevel: metrics.ALPHA,
}, []string{"writer"})

// registerStatusMetrics registers the status writers' metric, once.
var registerStatusMetrics = sync.OnceFunc(func() {
	legacyregistry.MustRegister(statusWriteErrors)
})

// StatusWriter writes the status of API objects (PodGroups, Queues) for the
// replica that schedules. Gang and Proportion both write through it, so
// they share one set of rules:
//   - it starts with the first scheduling activity (Enqueue), so a standby
//     replica, which schedules nothing, never writes;
//   - writes for one key are coalesced to at most one per interval: a
//     1000-pod gang changes a thousand times in a second, readers need a
//     few updates;
//   - a failed write is retried after twice the interval;
//   - it stops with the scheduler's context.
type StatusWriter[K comparable] struct {
	ctx      context.Context
	name     string
	interval time.Duration
	write    func(context.Context, K) error
	onStart  func()
	queue    workqueue.TypedDelayingInterface[K]
	start    sync.Once
	started  atomic.Bool
}

// NewStatusWriter returns a writer that calls write for each key enqueued;
// onStart, if given, runs once when the writer starts (to catch up with
// what changed while no replica wrote, or to start a periodic refresh).
func NewStatusWriter[K comparable](ctx context.Context, name string, interval time.Duration, write func(context.Context, K) error, onStart func()) *StatusWriter[K] {
	registerStatusMetrics()
	queue := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[K]{Name: name})
	statusWriteErrors.WithLabelValues(name) // the series exists, at 0, before the first error
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	return &StatusWriter[K]{ctx: ctx, name: name, interval: interval, write: write, onStart: onStart, queue: queue}
}

// Enqueue schedules a write of key and starts the writer: only scheduling
// activity calls it.
func (w *StatusWriter[K]) Enqueue(key K) {
	w.Start()
	w.queue.AddAfter(key, w.interval)
}

// Start starts the writer without a key.
func (w *StatusWriter[K]) Start() {
	w.start.Do(func() {
		w.started.Store(true)
		go w.run()
		if w.onStart != nil {
			w.onStart()
		}
	})
}

// Notify schedules a write of key for a change the informers saw, if this
// replica writes at all.
func (w *StatusWriter[K]) Notify(key K) {
	if w.started.Load() {
		w.queue.AddAfter(key, w.interval)
	}
}

// NotifyAfter schedules a write of key after d, if this replica writes
// at all: for a write that waits for the informers.
func (w *StatusWriter[K]) NotifyAfter(key K, d time.Duration) {
	if w.started.Load() {
		w.queue.AddAfter(key, d)
	}
}

func (w *StatusWriter[K]) run() {
	for {
		key, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		if err := w.write(w.ctx, key); err != nil && w.ctx.Err() == nil {
			klog.FromContext(w.ctx).V(2).Info("Writing status failed; retrying", "writer", w.name, "key", key, "err", err)
			statusWriteErrors.WithLabelValues(w.name).Inc()
			w.queue.AddAfter(key, 2*w.interval)
		}
		w.queue.Done(key)
	}
}

// StatusPatch is the merge patch that sets fields of an object's status.
// A field whose value is nil is cleared: a merge patch that omits a field
// keeps its old value, so counts and lists that became empty must be
// spelled out.
func StatusPatch(fields map[string]interface{}) ([]byte, error) {
	return json.Marshal(map[string]interface{}{"status": fields})
}
