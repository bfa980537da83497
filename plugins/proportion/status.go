package proportion

import (
	"context"
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
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/fairshare"
	"github.com/flotilla-sched/flotilla/plugins/state/queues"
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
	queueGuaranteed = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "queue_guaranteed", Help: "A queue's guarantee, per resource it guarantees (cpu in cores).", StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	queueCapability = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "queue_capability", Help: "A queue's capability (its ceiling), per resource it caps (cpu in cores).", StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	queueUsage = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "queue_usage_ratio", Help: "The fraction of its pool a queue used over time (decayed usage; set with usageHalfLife on), per resource.", StabilityLevel: metrics.ALPHA,
	}, []string{"queue", "resource"})
	// The per-resource gauges.
	perResource = []*metrics.GaugeVec{queueDeserved, queueAllocated, queueRequested, queueGuaranteed, queueCapability, queueUsage}

	queuePendingGangs = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "queue_pending_gangs", Help: "A queue's gangs short of their quorum.", StabilityLevel: metrics.ALPHA,
	}, []string{"queue"})
	queueRunningGangs = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "queue_running_gangs", Help: "A queue's gangs at their quorum (succeeded members count).", StabilityLevel: metrics.ALPHA,
	}, []string{"queue"})
	queueValid = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "queue_valid", Help: "1 if a Queue's spec can be honoured (its Valid condition), 0 if not.", StabilityLevel: metrics.ALPHA,
	}, []string{"queue"})
	perQueue = []*metrics.GaugeVec{queuePendingGangs, queueRunningGangs, queueValid}
)

// registerMetrics registers the plugin's metrics with the scheduler's
// registry, once however many profiles build the plugin.
var registerMetrics = sync.OnceFunc(func() {
	legacyregistry.MustRegister(queueDeserved, queueAllocated, queueRequested, queueGuaranteed, queueCapability, queueUsage,
		queuePendingGangs, queueRunningGangs, queueValid)
})

// allQueues is the status writer's one key: every publication covers every
// queue, since shares move together.
type allQueues struct{}

// statusWriter publishes each Queue's shares to its status and to metrics,
// once per scheduler (see perScheduler), through the writer every flotilla
// status goes through: it starts with the first admission decision, so
// only the replica that schedules writes, and then refreshes every
// statusInterval.
type statusWriter struct {
	queues *queues.Queues
	writer *state.StatusWriter[allQueues]
	// gauged are the label pairs set by the last publication, so that a
	// deleted queue, or a resource a queue no longer has, leaves no stale
	// series behind.
	gauged map[[2]string]bool
	// usageWritten is when (by queues.UsageClock) usage was last written
	// to the statuses: it is written every usage status interval, not on
	// every publication, as it changes continuously.
	usageWritten time.Time
	// activate re-queues pods at once (the scheduler's Activate).
	activate func(pods map[string]*corev1.Pod)
}

// statusWriterFor returns the scheduler's Queue status writer, building it
// on first use: every profile running Proportion shares it.
func statusWriterFor(ctx context.Context, store *state.Store, accounting *queues.Queues, activate func(map[string]*corev1.Pod)) (*statusWriter, error) {
	return state.Shared(store, Name, func() (*statusWriter, error) {
		w := &statusWriter{queues: accounting, gauged: map[[2]string]bool{}, activate: activate}
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
	gangs := w.queues.Gangs()
	// Usage and lapsing demand holds move shares with no event: the pods of
	// queues whose share rose are tried again now, not at the next event or
	// the periodic flush.
	// A queue that may reclaim and has not moved since the last
	// publication has one pod tried again (queues.Queues.StalledReclaims).
	// A queue whose allocation fell has its first waiting pod tried again
	// (queues.Queues.FreedRoom).
	woken := append(w.queues.RaisedShares(), w.queues.StalledReclaims()...)
	if woken = append(woken, w.queues.FreedRoom()...); len(woken) > 0 && w.activate != nil {
		pods := make(map[string]*corev1.Pod, len(woken))
		for _, pod := range woken {
			pods[pod.Namespace+"/"+pod.Name] = pod
		}
		w.activate(pods)
	}
	usageConfig, usage, usageOn := w.queues.Usage()
	writeUsage := usageOn && queues.UsageClock.Since(w.usageWritten) >= usageConfig.StatusInterval
	if writeUsage {
		w.usageWritten = queues.UsageClock.Now()
	}
	gauged := map[[2]string]bool{}
	var failed error
	for name, info := range view.Queues {
		requested := info.Allocated.Plus(info.Pending)
		setGauges(gauged, name, info, requested, gangs.Running[name], gangs.Pending[name])
		setUsageGauges(gauged, name, usage[name])
		if !info.Exists {
			continue
		}
		written := usageWrite{on: usageOn}
		if writeUsage {
			written.usage = queues.UsageStatus(usage[name])
			written.now = true
		}
		if err := w.write(ctx, info, requested, gangs, written); err != nil {
			klog.FromContext(ctx).V(2).Info("Writing Queue status failed", "queue", name, "err", err)
			failed = err
		}
	}
	for labels := range w.gauged {
		if gauged[labels] {
			continue
		}
		if labels[1] == "" {
			for _, vec := range perQueue {
				vec.DeleteLabelValues(labels[0])
			}
			continue
		}
		for _, vec := range perResource {
			vec.DeleteLabelValues(labels[0], labels[1])
		}
	}
	w.gauged = gauged
	return failed
}

// setGauges sets a queue's gauges and records their label pairs in gauged
// (the queue with an empty resource for the per-queue gauges). A resource
// a queue has in one of its per-resource gauges is set in all of them (0
// where it has none: no guarantee, or nothing allocated), except
// capability, where absent means unlimited, not 0.
func setGauges(gauged map[[2]string]bool, queue string, info *queues.QueueInfo, requested capacity.Resources, running, pending int32) {
	valid := 1.0
	if info.Invalid != "" {
		valid = 0
	}
	queueValid.WithLabelValues(queue).Set(valid)
	queueRunningGangs.WithLabelValues(queue).Set(float64(running))
	queuePendingGangs.WithLabelValues(queue).Set(float64(pending))
	gauged[[2]string{queue, ""}] = true

	resources := map[corev1.ResourceName]bool{}
	for _, r := range []capacity.Resources{info.Deserved, info.Allocated, requested, info.Guarantee, info.Capability} {
		for name := range r {
			resources[name] = true
		}
	}
	for name := range resources {
		set := func(vec *metrics.GaugeVec, value int64) {
			vec.WithLabelValues(queue, string(name)).Set(capacity.InAPIUnits(name, float64(value)))
		}
		set(queueDeserved, info.Deserved[name])
		set(queueAllocated, info.Allocated[name])
		set(queueRequested, requested[name])
		set(queueGuaranteed, info.Guarantee[name])
		if limit, ok := info.Capability[name]; ok {
			set(queueCapability, limit)
		} else {
			queueCapability.DeleteLabelValues(queue, string(name))
		}
		gauged[[2]string{queue, string(name)}] = true
	}
}

// usageWrite is what a publication writes of a queue's usage: with usage
// on, its current usage when it is time to (now), else what the status
// holds; with usage off, nothing (a status left from when it was on is
// cleared).
type usageWrite struct {
	on, now bool
	usage   *flotillav1alpha1.QueueUsage
}

// setUsageGauges sets a queue's usage ratio per resource of its pool.
func setUsageGauges(gauged map[[2]string]bool, queue string, usage *fairshare.Usage) {
	if usage == nil {
		return
	}
	for name := range usage.Capacity {
		queueUsage.WithLabelValues(queue, string(name)).Set(usage.Fraction(name))
		gauged[[2]string{queue, string(name)}] = true
	}
}

func (w *statusWriter) write(ctx context.Context, info *queues.QueueInfo, requested capacity.Resources, gangs queues.QueueGangs, usage usageWrite) error {
	obj, exists, err := w.queues.Informer().GetIndexer().GetByKey(info.Name)
	if err != nil || !exists {
		return err
	}
	current := obj.(*flotillav1alpha1.Queue)
	status := flotillav1alpha1.QueueStatus{
		Deserved: info.Deserved.List(), Allocated: info.Allocated.List(), Requested: requested.List(),
		RunningGangs: gangs.Running[info.Name], PendingGangs: gangs.Pending[info.Name], PendingPods: gangs.PendingPods[info.Name],
		Conditions: append([]metav1.Condition(nil), current.Status.Conditions...),
	}
	switch {
	case usage.now:
		status.Usage = usage.usage
	case usage.on:
		status.Usage = current.Status.Usage
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
	for _, k := range []string{"deserved", "allocated", "requested", "runningGangs", "pendingGangs", "pendingPods", "usage"} {
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
