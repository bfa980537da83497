package gang

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"k8s.io/apimachinery/pkg/runtime"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

var _ fwk.PodGroupPostFilterPlugin = &Gang{}

// PodGroupPostFilter holds room for a native PodGroup that
// kube-scheduler's pod-group cycle could not place, as PreFilter does for
// a scheduler-plugins gang whose quorum does not fit (doc.go,
// Reservation): it plans where the quorum will be placeable soonest once
// running pods end and holds that room, or says on the group why it holds
// none. It never makes the group schedulable now, so it returns
// Unschedulable and the next PodGroupPostFilter (Preemption's) still
// runs. A group its queue refused holds nothing and gives up what it held.
func (g *Gang) PodGroupPostFilter(ctx context.Context, group fwk.PodGroupCycleState, info fwk.PodGroupInfo, _ fwk.PodGroupSchedulingFunc) (*fwk.PodGroupPostFilterResult, *fwk.Status) {
	if g.reserve == nil || info.GetType() != fwk.PodGroupKeyType {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	key := state.GroupKey{Namespace: info.GetNamespace(), Name: info.GetName(), Native: true}
	pg := g.store.PodGroup(key)
	pending := info.GetUnscheduledPods()
	if pg == nil || len(pending) == 0 {
		// A basic group is no gang: its pods fit one by one.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if _, err := group.Read(state.QueueRefusedKey); err == nil {
		g.reserve.release(g, pg, key, "its queue no longer admits it")
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	nodes, err := g.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	topo, bad := g.topologyOf(pg, nodes)
	if bad != "" {
		return nil, fwk.NewStatus(fwk.Unschedulable, reasons.InvalidSpec.Say("gang %s holds no room: %s", key, bad))
	}
	var in *planInputs
	g.store.Lock(func(locked *state.Locked) {
		gang := locked.Gang(key)
		if !locked.Quorum(gang, pg).Reached() {
			in = readPlanInputs(locked, gang, pg, topo, corev1helpers.PodPriority(pending[0]))
		}
	})
	if in == nil {
		g.reserve.release(g, pg, key, "its quorum is placed")
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	held := g.reserve.holdRoom(ctx, g, pg, key, pending[0], in, nodes, topo)
	if held == nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	// Tried again at least as often as it is planned again, whatever the
	// events: an attempt that placed some members may fail on the room a
	// pod still held, after which no pod ends on the held nodes to wake it.
	g.shared.activateAfterBackoff(klog.FromContext(ctx), key, replanEvery)
	return nil, fwk.NewStatus(fwk.Unschedulable, reasons.InsufficientResources.Say("gang %s does not fit now; it %s", key, held.Describe()))
}

// releaseIfQuorumReserved ends a native group's reservation once its
// quorum is reserved: the pod-group cycle places the quorum at once, and
// what it placed is assumed on its nodes, so no room needs holding.
func (r *reserver) releaseIfQuorumReserved(g *Gang, key state.GroupKey) {
	if r == nil || !key.Native || r.book.Get(key) == nil {
		return
	}
	pg := g.store.PodGroup(key)
	if pg == nil {
		return
	}
	var reached bool
	g.store.Lock(func(locked *state.Locked) { reached = locked.Quorum(locked.Gang(key), pg).Reached() })
	if reached {
		r.release(g, pg, key, "its quorum is placed")
	}
}

// forgetDeletedGroup ends a deleted PodGroup's reservation, of either
// kind.
func (r *reserver) forgetDeletedGroup(key state.GroupKey) {
	if _, held := r.book.Release(key); held {
		reservationsHeld.Set(float64(r.book.Len()))
	}
}

// wakeNativeHolders re-queues a native gang that holds room each time a
// pod on one of its held nodes ends. kube-scheduler re-queues a pod group
// by the hints of the plugins that rejected its members (the resource
// filters, the in-tree GangScheduling), not Gang's, and backs it off
// between tries, so a group would otherwise find its room freed only up to
// a back-off later; a scheduler-plugins gang is re-queued by Gang's own
// hints (isSchedulableAfterRoomChange). Registered once per scheduler.
func (r *reserver) wakeNativeHolders(store *state.Store, shared *perScheduler) error {
	if r == nil {
		return nil
	}
	wake := func(node string) {
		var holders []state.GroupKey
		for _, h := range r.book.Holds().On(node) {
			if h.Gang.Native {
				holders = append(holders, h.Gang)
			}
		}
		if len(holders) > 0 {
			shared.activatePending(klog.Background(), "", holders...)
		}
	}
	_, err := state.Shared(store, Name+"/native-holders", func() (bool, error) {
		_, err := store.Informers().Pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, updated interface{}) {
				before, ok1 := old.(*corev1.Pod)
				after, ok2 := updated.(*corev1.Pod)
				if ok1 && ok2 && !podutil.IsPodTerminal(before) && podutil.IsPodTerminal(after) {
					wake(after.Spec.NodeName)
				}
			},
			DeleteFunc: func(obj interface{}) {
				if pod, ok := state.Unwrap(obj).(*corev1.Pod); ok && pod.Spec.NodeName != "" {
					wake(pod.Spec.NodeName)
				}
			},
		})
		return true, err
	})
	return err
}

// eventOnGroup records an event on the gang's group: the scheduler-plugins
// PodGroup, or for a native group the native PodGroup itself (pg is then
// its projection, which the apiserver does not know).
func eventOnGroup(g *Gang, pg *schedv1alpha1.PodGroup, key state.GroupKey, eventType, reason, action, format string, args ...interface{}) {
	var about runtime.Object = pg
	if key.Native {
		native := g.store.Native().Group(key)
		if native == nil {
			return
		}
		about = native
	}
	if pg == nil && !key.Native {
		return
	}
	g.handle.EventRecorder().Eventf(about, nil, eventType, reason, action, "%s", fmt.Sprintf(format, args...))
}
