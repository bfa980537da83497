package preemption

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
)

// evict starts deleting the plan's victims and nominating the preemptor's
// siblings; it does not wait, so the scheduling cycle is not held up by
// API calls (the preemptor is retried when the victims are gone).
func (p *Preemption) evict(ctx context.Context, who *preemptor, pl *plan, w *world) {
	logger := klog.FromContext(ctx)
	victims := pl.pods()
	reclaimed := map[types.UID]bool{}
	for _, u := range pl.victims {
		for _, m := range u.members {
			reclaimed[m.info.GetPod().UID] = reclaimed[m.info.GetPod().UID] || u.reclaim
		}
	}
	refs := make([]podRef, 0, len(victims))
	nodes := map[string]bool{}
	var nReclaimed int
	for _, m := range victims {
		pod := m.info.GetPod()
		refs = append(refs, podRef{namespace: pod.Namespace, name: pod.Name, node: m.node, uid: pod.UID})
		nodes[m.node] = true
		if reclaimed[pod.UID] {
			nReclaimed++
		}
	}
	var claims []string
	if who.devices != nil {
		leaving := func(uid types.UID) bool { _, ok := reclaimed[uid]; return ok }
		for _, m := range victims {
			freed, _ := p.store.Devices().Released(m.info.GetPod(), leaving)
			claims = append(claims, freed...)
		}
	}
	p.evictions.track(who, refs, claims)

	nodeNames := make([]string, 0, len(nodes))
	for n := range nodes {
		nodeNames = append(nodeNames, n)
	}
	sort.Strings(nodeNames)
	logger.V(2).Info("Preempting", "preemptor", who.what, "queue", who.queue, "victims", len(victims), "reclaimed", nReclaimed, "nodes", nodeNames)
	p.handle.EventRecorder().Eventf(who.pod, nil, corev1.EventTypeNormal, "Preempting", "Scheduling",
		"evicting %d pods (%d reclaimed from other queues) on %s to make room for %s", len(victims), nReclaimed, strings.Join(nodeNames, ", "), who.what)

	go func() {
		// The eviction outlives the scheduling cycle that chose it.
		ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), time.Minute)
		defer cancel()
		for _, m := range victims {
			kind := kindPreemption
			if reclaimed[m.info.GetPod().UID] {
				kind = kindReclaim
			}
			if err := p.evictOne(ctx, who, m.info.GetPod(), kind, w); err != nil {
				logger.Error(err, "Evicting victim", "preemptor", who.what, "victim", klog.KObj(m.info.GetPod()))
				p.evictions.dropVictim(who.id, m.info.GetPod().UID)
				continue
			}
			victimsTotal.WithLabelValues(kind).Inc()
		}
		for _, m := range who.members {
			if m.UID == who.pod.UID {
				continue // nominated through the scheduler
			}
			patch := fmt.Sprintf(`{"status":{"nominatedNodeName":%q}}`, pl.placement[m.UID])
			if _, err := p.handle.ClientSet().CoreV1().Pods(m.Namespace).Patch(ctx, m.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
				logger.Error(err, "Nominating gang member", "pod", klog.KObj(m), "node", pl.placement[m.UID])
			}
		}
	}()
}

// evictOne marks the victim with DisruptionTarget, says why, and deletes it.
func (p *Preemption) evictOne(ctx context.Context, who *preemptor, victim *corev1.Pod, kind string, w *world) error {
	message := p.describe(who, victim, kind, w)
	condition := &corev1.PodCondition{
		Type:    corev1.DisruptionTarget,
		Status:  corev1.ConditionTrue,
		Reason:  corev1.PodReasonPreemptionByScheduler,
		Message: fmt.Sprintf("%s: %s", who.pod.Spec.SchedulerName, message),
	}
	status := victim.Status.DeepCopy()
	if podutil.UpdatePodCondition(status, condition) {
		if err := schedutil.PatchPodStatus(ctx, p.handle.ClientSet(), victim.Name, victim.Namespace, &victim.Status, status); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}
	}
	err := p.handle.ClientSet().CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(victim.UID))})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return err
	}
	reason := "Preempted"
	if kind == kindReclaim {
		reason = "Reclaimed"
	}
	// The event's related object is the preemptor only where the victim's
	// readers may read it.
	var related runtime.Object
	if who.pod.Namespace == victim.Namespace {
		related = who.pod
	}
	p.handle.EventRecorder().Eventf(victim, related, corev1.EventTypeNormal, reason, "Preempting", message)
	return nil
}

func (p *Preemption) describe(who *preemptor, victim *corev1.Pod, kind string, w *world) string {
	if kind == kindReclaim {
		queue := w.queues.QueueOf(victim)
		return fmt.Sprintf("reclaimed by queue %q for %s: queue %q is above its deserved share", who.queue, who.what.SeenFrom(victim.Namespace), queue)
	}
	if who.queue != "" {
		return fmt.Sprintf("preempted by %s (priority %d) of the same queue %q", who.what.SeenFrom(victim.Namespace), who.priority, who.queue)
	}
	return fmt.Sprintf("preempted by %s (priority %d)", who.what.SeenFrom(victim.Namespace), who.priority)
}
