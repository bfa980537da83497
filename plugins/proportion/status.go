package proportion

import (
	"context"
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
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
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
)

func init() {
	legacyregistry.MustRegister(queueDeserved, queueAllocated, queueRequested)
}

// allQueues is the status writer's one key: every publication covers every
// queue, since shares move together.
type allQueues struct{}

// statusWriter publishes each Queue's shares to its status and to metrics,
// once per scheduler (see perScheduler), through the writer every flotilla
// status goes through: it starts with the first admission decision, so
// only the replica that schedules writes, and then refreshes every
// statusInterval.
type statusWriter struct {
	queues *state.Queues
	writer *state.StatusWriter[allQueues]
	// gauged are the label pairs set by the last publication, so that a
	// deleted queue, or a resource a queue no longer has, leaves no stale
	// series behind.
	gauged map[[2]string]bool
}

// statusWriterFor returns the scheduler's Queue status writer, building it
// on first use: every profile running Proportion shares it.
func statusWriterFor(ctx context.Context, store *state.Store, queues *state.Queues) (*statusWriter, error) {
	return state.Shared(store, Name, func() (*statusWriter, error) {
		w := &statusWriter{queues: queues, gauged: map[[2]string]bool{}}
		w.writer = state.NewStatusWriter(ctx, "flotilla-queue-status", statusInterval, w.publish, func() {
			go func() {
				ticker := time.NewTicker(statusInterval)
				defer ticker.Stop()
				for {
					w.writer.Notify(allQueues{})
					select {
					case <-ctx.Done():
						return
					case <-ticker.C:
					}
				}
			}()
		})
		return w, nil
	})
}

// start starts the writer; scheduling activity calls it.
func (w *statusWriter) start() { w.writer.Start() }

func (w *statusWriter) publish(ctx context.Context, _ allQueues) error {
	view := w.queues.View()
	running, pending := w.queues.GangCounts()
	gauged := map[[2]string]bool{}
	var failed error
	for name, info := range view.Queues {
		requested := info.Allocated.Clone()
		requested.Add(info.Pending)
		setGauges(gauged, name, info.Deserved, info.Allocated, requested)
		if !info.Exists {
			continue
		}
		if err := w.write(ctx, info, requested, running[name], pending[name]); err != nil {
			klog.FromContext(ctx).V(2).Info("Writing Queue status failed", "queue", name, "err", err)
			failed = err
		}
	}
	for labels := range w.gauged {
		if !gauged[labels] {
			for _, vec := range []*metrics.GaugeVec{queueDeserved, queueAllocated, queueRequested} {
				vec.DeleteLabelValues(labels[0], labels[1])
			}
		}
	}
	w.gauged = gauged
	return failed
}

// setGauges sets a queue's gauges and records their label pairs in gauged.
func setGauges(gauged map[[2]string]bool, queue string, deserved, allocated, requested capacity.Resources) {
	for _, g := range []struct {
		vec *metrics.GaugeVec
		r   capacity.Resources
	}{{queueDeserved, deserved}, {queueAllocated, allocated}, {queueRequested, requested}} {
		for name, v := range g.r {
			value := float64(v)
			if name == corev1.ResourceCPU {
				value /= 1000
			}
			g.vec.WithLabelValues(queue, string(name)).Set(value)
			gauged[[2]string{queue, string(name)}] = true
		}
	}
}

func (w *statusWriter) write(ctx context.Context, info *state.QueueInfo, requested capacity.Resources, running, pending int32) error {
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
	patch, err := state.StatusPatch(fields)
	if err != nil {
		return err
	}
	_, err = w.queues.Dynamic().Resource(flotillav1alpha1.QueueResource).Patch(ctx, info.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
