package proportion

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// statusInterval bounds Queue status writes: shares change with every pod,
// readers need them a few times a minute.
const statusInterval = time.Second

var (
	queueDeserved = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "queue_deserved", Help: "A queue's deserved share, per resource (cpu in cores).", StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	queueAllocated = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "queue_allocated", Help: "What a queue's placed pods request, per resource (cpu in cores).", StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	queueRequested = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "queue_requested", Help: "What a queue's placed and pending pods request, per resource (cpu in cores).", StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	registerMetrics sync.Once
)

// statusWriter publishes each Queue's shares to its status and to metrics.
// It starts with the first admission decision, so only the replica that
// schedules writes.
type statusWriter struct {
	ctx    context.Context
	queues *state.Queues
	once   sync.Once
}

func newStatusWriter(ctx context.Context, queues *state.Queues) *statusWriter {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(queueDeserved, queueAllocated, queueRequested)
	})
	return &statusWriter{ctx: ctx, queues: queues}
}

func (w *statusWriter) start() {
	w.once.Do(func() {
		go func() {
			ticker := time.NewTicker(statusInterval)
			defer ticker.Stop()
			for {
				w.publish()
				select {
				case <-w.ctx.Done():
					return
				case <-ticker.C:
				}
			}
		}()
	})
}

func (w *statusWriter) publish() {
	view := w.queues.View()
	running, pending := w.queues.GangCounts()
	for name, info := range view.Queues {
		requested := info.Allocated.Clone()
		requested.Add(info.Pending)
		setGauges(name, info.Deserved, info.Allocated, requested)
		if !info.Exists {
			continue
		}
		if err := w.write(info, requested, running[name], pending[name]); err != nil {
			klog.FromContext(w.ctx).V(2).Info("Writing Queue status failed", "queue", name, "err", err)
		}
	}
}

func setGauges(queue string, deserved, allocated, requested state.Resources) {
	for _, g := range []struct {
		vec *metrics.GaugeVec
		r   state.Resources
	}{{queueDeserved, deserved}, {queueAllocated, allocated}, {queueRequested, requested}} {
		for name, v := range g.r {
			value := float64(v)
			if name == corev1.ResourceCPU {
				value /= 1000
			}
			g.vec.WithLabelValues(queue, string(name)).Set(value)
		}
	}
}

func (w *statusWriter) write(info *state.QueueInfo, requested state.Resources, running, pending int32) error {
	obj, exists, err := w.queues.Informer().GetIndexer().GetByKey(info.Name)
	if err != nil || !exists {
		return err
	}
	current := obj.(*flotillav1alpha1.Queue)
	status := flotillav1alpha1.QueueStatus{
		Deserved: info.Deserved.List(), Allocated: info.Allocated.List(), Requested: requested.List(),
		RunningGangs: running, PendingGangs: pending,
		Conditions: append([]metav1.Condition(nil), current.Status.Conditions...),
	}
	valid := metav1.Condition{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", Message: "the queue's spec can be honoured", ObservedGeneration: current.Generation}
	if info.Invalid != "" {
		valid = metav1.Condition{Type: "Valid", Status: metav1.ConditionFalse, Reason: "InvalidSpec", Message: info.Invalid, ObservedGeneration: current.Generation}
	}
	meta.SetStatusCondition(&status.Conditions, valid)
	if apiequality.Semantic.DeepEqual(current.Status, status) {
		return nil
	}
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return err
	}
	// Counts and lists that became empty must be cleared, not omitted.
	for _, k := range []string{"deserved", "allocated", "requested", "runningGangs", "pendingGangs"} {
		if _, ok := fields[k]; !ok {
			fields[k] = nil
		}
	}
	patch, err := json.Marshal(map[string]interface{}{"status": fields})
	if err != nil {
		return err
	}
	_, err = w.queues.Dynamic().Resource(flotillav1alpha1.QueueResource).Patch(w.ctx, info.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
