package preemption

import (
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// An eviction is remembered from the moment its victims are chosen until
// they are gone and its preemptor's pods are placed. Until then other
// preemptions must count it: its victims are leaving (room being freed,
// and taken from their queues already) and its preemptor's pods are as
// good as placed (charged to their queue). Without that, preemptors chosen
// back to back, before the first victims' deletions reach the snapshot,
// reclaim past the deserved share and the queue they over-took from
// reclaims back.
type eviction struct {
	victims []podRef
	members []podRef
	queue   string
	started time.Time
	// victimsGone is when the eviction was first seen with no victim left.
	victimsGone time.Time
	// claims are the victims' ResourceClaims (namespace/name) the eviction
	// frees: their devices are free only once the resourceclaim
	// controller deallocates them, after the victims are gone.
	claims []string
}

type podRef struct {
	namespace, name, node string
	uid                   types.UID
}

// evictions are the evictions in flight and the preemptors waiting for
// pods in flight to settle, under one lock: PreEnqueue, the queueing
// hint, every preemption's survey and its eviction read and write them.
type evictions struct {
	handle fwk.Handle
	store  preemptionState
	pods   corelisters.PodLister

	mu sync.Mutex
	// inFlight: evictions started for a preemptor (a pod or a gang) whose
	// victims may still hold their nodes or whose pods are not placed yet.
	inFlight map[string]*eviction
	// settling: preemptors that found no plan while pods they may evict
	// were in flight (waiting in Permit or binding), by preemptor UID
	// (awaitSettling).
	settling map[types.UID]*settlingWait
}

// newEvictions starts with none in flight; handle activates the pods
// waiting and shows the cycle's snapshot, pods is the pods informer.
func newEvictions(handle fwk.Handle, store preemptionState, pods corelisters.PodLister) *evictions {
	return &evictions{handle: handle, store: store, pods: pods, inFlight: map[string]*eviction{}}
}

// forgetAfter bounds how long an eviction whose preemptor never got placed
// is counted.
const forgetAfter = 2 * time.Minute

// claimAfterVictimsGone bounds how long a preemptor not placed yet is still
// counted as placed once its victims are gone. Its room is then in the
// snapshot and its queue's allocation: the preemptor normally binds within
// a cycle (its victims' deletion re-queues it at once). If it does not —
// another pod of its queue took the share the victims gave back, which
// the queue's admission allows — its claim would count that share twice
// and, until forgetAfter, keep its queue from reclaiming what it is owed.
const claimAfterVictimsGone = 2 * time.Second

func (ev *evictions) track(who *preemptor, victims []podRef, claims []string) {
	e := &eviction{victims: victims, queue: who.queue, started: time.Now(), claims: claims}
	for _, m := range who.members {
		e.members = append(e.members, podRef{namespace: m.Namespace, name: m.Name, uid: m.UID})
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.inFlight[who.id] = e
}

// exists reports whether the pod is still in the informer or, for a
// victim, in this cycle's snapshot.
func (ev *evictions) exists(ref podRef) (*corev1.Pod, bool) {
	if pod, err := ev.pods.Pods(ref.namespace).Get(ref.name); err == nil && pod.UID == ref.uid {
		return pod, true
	}
	return nil, ref.node != "" && ev.inSnapshot(ref)
}

// victimsPending counts the victims of the eviction for id that still
// exist, in the informer or in this cycle's snapshot, and the claims it
// frees that are still allocated.
func (ev *evictions) victimsPending(id string) (victims, claims int) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.pruneLocked()
	e := ev.inFlight[id]
	if e == nil {
		return 0, 0
	}
	for _, c := range e.claims {
		namespace, name, _ := strings.Cut(c, "/")
		if ev.store.Devices().StillAllocated(namespace, name) {
			claims++
		}
	}
	return ev.liveVictims(e, true), claims
}

// liveVictims counts an eviction's victims that still exist. Outside a
// scheduling cycle the snapshot may be stale, so only the informer counts.
// Called with ev.mu held.
func (ev *evictions) liveVictims(e *eviction, withSnapshot bool) int {
	n := 0
	for _, v := range e.victims {
		ref := v
		if !withSnapshot {
			ref.node = ""
		}
		if _, ok := ev.exists(ref); ok {
			n++
		}
	}
	return n
}

// claim is what a preemptor not placed yet will take from its queue.
type claim struct {
	queue   string
	request capacity.Resources
}

// pending returns, for every eviction but id's, the victims still leaving
// and what its preemptor's pods not placed yet will take.
func (ev *evictions) pending(id string) (leaving map[types.UID]podRef, claims []claim) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.pruneLocked()
	leaving = map[types.UID]podRef{}
	for other, e := range ev.inFlight {
		if other == id {
			continue
		}
		for _, v := range e.victims {
			leaving[v.uid] = v
		}
		for _, m := range e.members {
			if pod, ok := ev.exists(m); ok && pod.Spec.NodeName == "" {
				claims = append(claims, claim{queue: e.queue, request: capacity.Request(pod)})
			}
		}
	}
	return leaving, claims
}

// pruneLocked forgets evictions that are over: no victim left and every
// preemptor pod placed or gone, or no victim left for
// claimAfterVictimsGone.
func (ev *evictions) pruneLocked() {
	now := time.Now()
	for id, e := range ev.inFlight {
		if now.Sub(e.started) > forgetAfter {
			delete(ev.inFlight, id)
			continue
		}
		over := true
		for _, v := range e.victims {
			if _, ok := ev.exists(v); ok {
				over = false
				break
			}
		}
		// A victim is gone with its devices: once its claims are
		// deallocated.
		for _, c := range e.claims {
			if !over {
				break
			}
			namespace, name, _ := strings.Cut(c, "/")
			over = !ev.store.Devices().StillAllocated(namespace, name)
		}
		if over && e.victimsGone.IsZero() {
			e.victimsGone = now
		}
		if over && now.Sub(e.victimsGone) > claimAfterVictimsGone {
			delete(ev.inFlight, id)
			continue
		}
		for _, m := range e.members {
			if !over {
				break
			}
			if pod, ok := ev.exists(m); ok && pod.Spec.NodeName == "" {
				over = false
			}
		}
		if over {
			delete(ev.inFlight, id)
		}
	}
}

// evictionID names what a pod preempts for: its gang, or itself.
func evictionID(pod *corev1.Pod, inGang bool) string {
	if key, ok := state.GroupOf(pod); ok && inGang {
		return "gang/" + key.String()
	}
	return string(pod.UID)
}

// evictionOfLocked returns the eviction a pod waits for: its gang's or
// its own. Called with ev.mu held.
func (ev *evictions) evictionOfLocked(pod *corev1.Pod) *eviction {
	if e := ev.inFlight[evictionID(pod, true)]; e != nil {
		return e
	}
	return ev.inFlight[evictionID(pod, false)]
}

// waitingFor counts the victims the informer still has of the eviction a
// pod waits for.
func (ev *evictions) waitingFor(pod *corev1.Pod) int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if e := ev.evictionOfLocked(pod); e != nil {
		return ev.liveVictims(e, false)
	}
	return 0
}

// isVictimOf reports whether uid is a victim of the eviction pod waits for;
// true when it waits for none, so that it is not held back.
func (ev *evictions) isVictimOf(pod *corev1.Pod, uid types.UID) bool {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	e := ev.evictionOfLocked(pod)
	if e == nil {
		return true
	}
	for _, v := range e.victims {
		if v.uid == uid {
			return true
		}
	}
	return false
}

// dropVictim forgets a victim whose eviction failed, so its preemptor does
// not wait for it.
func (ev *evictions) dropVictim(id string, uid types.UID) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	e := ev.inFlight[id]
	if e == nil {
		return
	}
	kept := e.victims[:0]
	for _, v := range e.victims {
		if v.uid != uid {
			kept = append(kept, v)
		}
	}
	e.victims = kept
}

// A preemptor's filters listen for room being freed (a pod deleted, a
// node added), not for a pod being bound: a preemptor that found no plan
// because the pods it may evict were in flight (waiting in Permit or
// binding, never victims) would wait for an unrelated event, up to the
// scheduler's five-minute flush. It is remembered with those pods instead,
// and activated once one of them is bound or deleted: its next attempt
// finds them running and evictable.
type settlingWait struct {
	pod   *corev1.Pod
	held  map[types.UID]podRef
	since time.Time
}

// awaitSettling remembers that the preemptor found no plan while the held
// pods were in flight. One already bound or gone (its event came before
// this) activates the preemptor at once; the scheduler then retries it
// after its attempt ends.
func (ev *evictions) awaitSettling(logger klog.Logger, pod *corev1.Pod, held map[types.UID]podRef) {
	for _, ref := range held {
		if got, err := ev.pods.Pods(ref.namespace).Get(ref.name); err != nil || got.UID != ref.uid || got.Spec.NodeName != "" {
			ev.handle.Activate(logger, map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
			return
		}
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.settling == nil {
		ev.settling = map[types.UID]*settlingWait{}
	}
	ev.settling[pod.UID] = &settlingWait{pod: pod, held: held, since: time.Now()}
}

// settled activates the preemptors waiting for the pod, and forgets waits
// older than forgetAfter (a preemptor placed or deleted meanwhile).
func (ev *evictions) settled(logger klog.Logger, uid types.UID) {
	wake := map[string]*corev1.Pod{}
	ev.mu.Lock()
	now := time.Now()
	for id, s := range ev.settling {
		if _, ok := s.held[uid]; ok {
			wake[s.pod.Namespace+"/"+s.pod.Name] = s.pod
			delete(ev.settling, id)
		} else if now.Sub(s.since) > forgetAfter {
			delete(ev.settling, id)
		}
	}
	ev.mu.Unlock()
	if len(wake) > 0 {
		logger.V(4).Info("Pods a preemptor may evict settled", "pod", uid, "preemptors", len(wake))
		ev.handle.Activate(logger, wake)
	}
}

// settlingHandler calls settled for each pod the informer shows bound or
// deleted.
func (ev *evictions) settlingHandler(logger klog.Logger) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj interface{}) {
			old, okOld := oldObj.(*corev1.Pod)
			pod, okNew := newObj.(*corev1.Pod)
			if okOld && okNew && old.Spec.NodeName == "" && pod.Spec.NodeName != "" {
				ev.settled(logger, pod.UID)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				ev.settled(logger, pod.UID)
			}
		},
	}
}
