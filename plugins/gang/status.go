package gang

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

// statusCoalesce is the shortest gap between two status writes for one
// PodGroup: a 1000-pod gang changes state a thousand times in a second, the
// apiserver needs to hear about it a few times.
const statusCoalesce = 500 * time.Millisecond

// PodGroupScheduled is the phase between the quorum being bound and
// minMember members running. scheduler-plugins' enum-free phase field takes
// it as it is.
const PodGroupScheduled schedv1alpha1.PodGroupPhase = "Scheduled"

// statusWriter keeps PodGroup status true. It writes with merge patches to
// the status subresource (no read-modify-write, so no conflicts), at most
// once per statusCoalesce per group, and counts only pods in the PodGroup's
// own namespace (scheduler-plugins' controller counts same-named groups in
// every namespace). It starts with the first scheduling activity, so only
// the leading replica writes.
type statusWriter struct {
	ctx     context.Context
	store   *state.Store
	handle  fwk.Handle
	queue   workqueue.TypedDelayingInterface[state.GroupKey]
	start   sync.Once
	started atomic.Bool
}

func newStatusWriter(ctx context.Context, store *state.Store, h fwk.Handle) *statusWriter {
	queue := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[state.GroupKey]{Name: "flotilla-podgroup-status"})
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	return &statusWriter{ctx: ctx, store: store, handle: h, queue: queue}
}

// enqueue schedules a status write; scheduling activity calls it, which
// starts the writer.
func (w *statusWriter) enqueue(key state.GroupKey) {
	w.start.Do(func() {
		w.started.Store(true)
		go w.run()
		w.catchUp()
	})
	w.queue.AddAfter(key, statusCoalesce)
}

// catchUp schedules one status write for every PodGroup not yet Finished
// when this replica starts writing: what changed while no scheduler was
// writing (a crash, a restart, a fail-over) was heard by nobody, and a
// gang whose members all finished meanwhile would stay Running for ever.
func (w *statusWriter) catchUp() {
	for _, obj := range w.store.PodGroupInformer().GetStore().List() {
		if pg, ok := obj.(*schedv1alpha1.PodGroup); ok && pg.Status.Phase != schedv1alpha1.PodGroupFinished {
			w.queue.AddAfter(state.GroupKey{Namespace: pg.Namespace, Name: pg.Name}, statusCoalesce)
		}
	}
}

// notify schedules a status write for a change seen by the informers (a
// member started running or finished) if this replica is the one scheduling.
func (w *statusWriter) notify(key state.GroupKey) {
	if w.started.Load() {
		w.queue.AddAfter(key, statusCoalesce)
	}
}

func (w *statusWriter) run() {
	for {
		key, shutdown := w.queue.Get()
		if shutdown {
			return
		}
		if err := w.write(key); err != nil {
			klog.FromContext(w.ctx).V(2).Info("Writing PodGroup status failed; retrying", "gang", key.String(), "err", err)
			w.queue.AddAfter(key, 2*statusCoalesce)
		}
		w.queue.Done(key)
	}
}

func (w *statusWriter) write(key state.GroupKey) error {
	pg := w.store.PodGroup(key)
	if pg == nil {
		return nil
	}
	// Terminated members leave the scheduler's informer, so count from the
	// apiserver; the coalescing keeps this to a few lists per gang.
	// ResourceVersion "0": from the apiserver's watch cache, not a quorum
	// read of etcd — a thousand gangs make thousands of these.
	pods, err := w.handle.ClientSet().CoreV1().Pods(key.Namespace).List(w.ctx, metav1.ListOptions{
		LabelSelector: labels.Set{schedv1alpha1.PodGroupLabel: key.Name}.String(), ResourceVersion: "0",
	})
	if err != nil {
		return err
	}
	var placing bool
	w.store.Lock(func(tx *state.Tx) {
		g := tx.Gang(key)
		placing = g.InFlight()
		tx.Forget(g)
	})
	status := computeStatus(pg, pods.Items, placing, metav1.Now())
	if statusEqual(pg.Status, status) {
		return nil
	}
	if status.Phase == schedv1alpha1.PodGroupPending && pg.Status.Phase != schedv1alpha1.PodGroupPending && int32(len(pods.Items)) < pg.Spec.MinMember {
		w.handle.EventRecorder().Eventf(pg, nil, corev1.EventTypeNormal, "WaitingForMembers", "Scheduling",
			"gang %s has %d of its minMember %d pods; it is not scheduled until they exist", key, len(pods.Items), pg.Spec.MinMember)
	}
	// Spelled out: the API type omits zero counts, and a merge patch that
	// omits a field keeps its old value.
	fields := map[string]interface{}{
		"phase": status.Phase, "running": status.Running, "succeeded": status.Succeeded, "failed": status.Failed,
	}
	if !status.ScheduleStartTime.IsZero() {
		fields["scheduleStartTime"] = status.ScheduleStartTime
	}
	patch, err := json.Marshal(map[string]interface{}{"status": fields})
	if err != nil {
		return err
	}
	_, err = w.store.Clients().SchedulingV1alpha1().PodGroups(key.Namespace).Patch(w.ctx, key.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// computeStatus derives a PodGroup's status from its pods.
func computeStatus(pg *schedv1alpha1.PodGroup, pods []corev1.Pod, placing bool, now metav1.Time) schedv1alpha1.PodGroupStatus {
	var bound, running, succeeded, failed int32
	for i := range pods {
		p := &pods[i]
		if p.Namespace != pg.Namespace || p.DeletionTimestamp != nil {
			continue
		}
		switch p.Status.Phase {
		case corev1.PodRunning:
			running++
		case corev1.PodSucceeded:
			succeeded++
		case corev1.PodFailed:
			failed++
		}
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	min := pg.Spec.MinMember
	status := schedv1alpha1.PodGroupStatus{
		Running: running, Succeeded: succeeded, Failed: failed,
		OccupiedBy:        pg.Status.OccupiedBy,
		ScheduleStartTime: pg.Status.ScheduleStartTime,
	}
	switch {
	case succeeded >= min:
		status.Phase = schedv1alpha1.PodGroupFinished
	case failed > 0 && int32(len(pods))-failed < min:
		status.Phase = schedv1alpha1.PodGroupFailed
	case running+succeeded >= min:
		status.Phase = schedv1alpha1.PodGroupRunning
	case bound >= min:
		status.Phase = PodGroupScheduled
	case placing || bound > 0:
		status.Phase = schedv1alpha1.PodGroupScheduling
	default:
		status.Phase = schedv1alpha1.PodGroupPending
	}
	if status.Phase != schedv1alpha1.PodGroupPending && status.ScheduleStartTime.IsZero() {
		status.ScheduleStartTime = now
	}
	return status
}

func statusEqual(a, b schedv1alpha1.PodGroupStatus) bool {
	return a.Phase == b.Phase && a.Running == b.Running && a.Succeeded == b.Succeeded && a.Failed == b.Failed &&
		a.OccupiedBy == b.OccupiedBy && a.ScheduleStartTime.Equal(&b.ScheduleStartTime)
}
