package queues

import (
	"time"

	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
)

// onClaim releases what done pods' accounts hold of a claim once it is
// deallocated or deleted.
func (q events) onClaim(obj interface{}, gone bool) {
	claim, ok := state.Unwrap(obj).(*resourceapi.ResourceClaim)
	if !ok || (!gone && claim.Status.Allocation != nil) {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releaseClaimLocked(claim.Namespace + "/" + claim.Name)
}

// onClaimConsumers follows a shared claim's charge as its consumers
// change: a claim several pods use is charged to the first pod its
// status.reservedFor lists (devices.Pays). The pods listed before or after
// whose part changed are charged again, and a done pod's account stops
// holding the claim's devices once another pod is charged them.
func (q events) onClaimConsumers(oldObj, newObj interface{}) {
	oldClaim, _ := oldObj.(*resourceapi.ResourceClaim)
	claim, _ := newObj.(*resourceapi.ResourceClaim)
	if oldClaim == nil || claim == nil || claim.Status.Allocation == nil {
		return
	}
	var changed []*corev1.Pod
	seen := map[types.UID]bool{}
	for _, consumers := range [][]resourceapi.ResourceClaimConsumerReference{oldClaim.Status.ReservedFor, claim.Status.ReservedFor} {
		for _, c := range consumers {
			if c.APIGroup != "" || c.Resource != "pods" || seen[c.UID] {
				continue
			}
			seen[c.UID] = true
			obj, ok, err := q.store.Informers().Pods.GetIndexer().GetByKey(claim.Namespace + "/" + c.Name)
			pod, _ := obj.(*corev1.Pod)
			if err != nil || !ok || pod == nil || pod.UID != c.UID {
				continue
			}
			if devices.Pays(pod, oldClaim) != devices.Pays(pod, claim) {
				changed = append(changed, pod)
			}
		}
	}
	for _, pod := range changed {
		q.onPod(pod)
	}
	key := claim.Namespace + "/" + claim.Name
	q.mu.Lock()
	defer q.mu.Unlock()
	for uid := range q.holding[key] {
		if !devices.Pays(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}}, claim) {
			q.releaseHolderLocked(key, uid)
		}
	}
}

// releaseDeallocatedLocked releases the claims held by done pods that the
// scheduler's DRA state no longer shows allocated: their event may have
// reached this handler before the DRA state that onPodDone read.
func (q events) releaseDeallocatedLocked() {
	for key := range q.holding {
		namespace, name, _ := strings.Cut(key, "/")
		if !q.store.Devices().StillAllocated(namespace, name) {
			q.releaseClaimLocked(key)
		}
	}
}

// releaseClaimLocked releases what done pods' accounts hold of a claim.
// Called with q.mu held.
func (q events) releaseClaimLocked(key string) {
	for uid := range q.holding[key] {
		q.releaseHolderLocked(key, uid)
	}
	delete(q.holding, key)
}

// releaseHolderLocked releases what one done pod's account holds of a
// claim; the account goes with the last claim it holds. Called with q.mu
// held.
func (q events) releaseHolderLocked(key string, uid types.UID) {
	if holders := q.holding[key]; holders != nil {
		delete(holders, uid)
		if len(holders) == 0 {
			delete(q.holding, key)
		}
	}
	acc := q.pods[uid]
	if acc == nil || acc.holds == nil {
		return
	}
	devices, ok := acc.holds[key]
	if !ok {
		return
	}
	q.charge(acc, -1)
	delete(acc.holds, key)
	q.demandChanged = true
	if len(acc.holds) == 0 {
		delete(q.pods, uid)
		q.ended.add(uid, time.Now())
		return
	}
	acc.request = acc.request.Clone()
	acc.request.Sub(devices)
	q.charge(acc, +1)
}
