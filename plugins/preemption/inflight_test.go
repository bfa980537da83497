package preemption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// TestPendingCountsAnEvictionUntilItIsOver: an eviction's preemptor is
// charged to its queue while its victims leave and a short while after,
// never for as long as it stays unplaced — a preemptor that lost its room
// to another pod of its queue must not keep that queue from reclaiming.
func TestPendingCountsAnEvictionUntilItIsOver(t *testing.T) {
	pod := func(name, node string) *corev1.Pod {
		w := st.MakePod().Namespace("ns").Name(name).UID(name).
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "1Gi"})
		if node != "" {
			w = w.Node(node)
		}
		return w.Obj()
	}
	ref := func(p *corev1.Pod) podRef { return podRef{namespace: p.Namespace, name: p.Name, uid: p.UID} }
	victim, unplaced, placed := pod("victim", "n1"), pod("preemptor", ""), pod("preemptor", "n1")
	now := time.Now()

	tests := []struct {
		name         string
		informer     []*corev1.Pod
		started      time.Time
		victimsGone  time.Time
		wantLeaving  int
		wantClaims   int
		wantInFlight bool
	}{
		{name: "victim still there: leaving, preemptor claimed", informer: []*corev1.Pod{victim, unplaced}, started: now, wantLeaving: 1, wantClaims: 1, wantInFlight: true},
		{name: "victims just gone, preemptor not placed yet: still claimed", informer: []*corev1.Pod{unplaced}, started: now, wantLeaving: 1, wantClaims: 1, wantInFlight: true},
		{name: "victims gone, preemptor placed: over", informer: []*corev1.Pod{placed}, started: now},
		{name: "victims gone, preemptor deleted: over", started: now},
		{name: "victims gone for longer than the grace, preemptor never placed: forgotten", informer: []*corev1.Pod{unplaced}, started: now.Add(-10 * time.Second), victimsGone: now.Add(-claimAfterVictimsGone - time.Second)},
		{name: "victim stuck past forgetAfter: forgotten", informer: []*corev1.Pod{victim, unplaced}, started: now.Add(-forgetAfter - time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			for _, p := range tc.informer {
				if err := indexer.Add(p); err != nil {
					t.Fatal(err)
				}
			}
			p := wired(&Preemption{pods: corelisters.NewPodLister(indexer)}, map[string]*eviction{
				"gang/ns/g": {victims: []podRef{ref(victim)}, members: []podRef{ref(unplaced)}, queue: "q", started: tc.started, victimsGone: tc.victimsGone},
			})

			leaving, claims := p.evictions.pending("another")

			assert.Len(t, leaving, tc.wantLeaving, "victims leaving")
			assert.Len(t, claims, tc.wantClaims, "claims")
			for _, c := range claims {
				assert.Equal(t, "q", c.queue)
			}
			_, inFlight := p.evictions.inFlight["gang/ns/g"]
			assert.Equal(t, tc.wantInFlight, inFlight, "still remembered")
		})
	}
}

// activations records what the plugin asks the scheduling queue to
// activate.
type activations struct {
	surveyHandle
	activated *[]string
}

func (h activations) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	for key := range pods {
		*h.activated = append(*h.activated, key)
	}
}

// TestAPreemptorHeldByPodsInFlightIsActivatedOnceOneSettles: a preemptor
// that found no plan while the pods it may evict were waiting in Permit or
// binding is activated once one of them is bound or deleted — its filters
// listen for room freed, not for a pod bound — and by nothing else.
func TestAPreemptorHeldByPodsInFlightIsActivatedOnceOneSettles(t *testing.T) {
	pod := func(name, node string) *corev1.Pod {
		w := st.MakePod().Namespace("ns").Name(name).UID(name).
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "2", corev1.ResourceMemory: "4Gi"})
		if node != "" {
			w = w.Node(node)
		}
		return w.Obj()
	}
	preemptor := pod("high", "")
	binding, boundNow := pod("binding", ""), pod("binding", "n1")
	leader, worker := pod("leader", ""), pod("worker", "")
	worker.Spec.Containers[0].Resources.Requests[corev1.ResourceName("nvidia.com/gpu")] = resource.MustParse("1")
	other, otherBound := pod("other", ""), pod("other", "n1")
	ref := func(p *corev1.Pod) podRef { return podRef{namespace: p.Namespace, name: p.Name, uid: p.UID} }

	tests := []struct {
		name          string
		informer      []*corev1.Pod
		held          []*corev1.Pod
		since         time.Time
		event         func(h cache.ResourceEventHandler)
		wantAtOnce    bool // activated when the wait is recorded
		wantActivated bool // activated by the event
		wantWaiting   bool // still remembered after the event
	}{
		{name: "a held pod is bound: activated", informer: []*corev1.Pod{binding, preemptor}, held: []*corev1.Pod{binding}, since: time.Now(),
			event: func(h cache.ResourceEventHandler) { h.OnUpdate(binding, boundNow) }, wantActivated: true},
		{name: "one of a gang's held members, a GPU worker unlike its leader, is bound: activated", informer: []*corev1.Pod{leader, worker, preemptor},
			held: []*corev1.Pod{leader, worker}, since: time.Now(),
			event: func(h cache.ResourceEventHandler) {
				w := worker.DeepCopy()
				w.Spec.NodeName = "gpu-1"
				h.OnUpdate(worker, w)
			}, wantActivated: true},
		{name: "a held pod is deleted, seen through a tombstone: activated", informer: []*corev1.Pod{binding, preemptor}, held: []*corev1.Pod{binding}, since: time.Now(),
			event: func(h cache.ResourceEventHandler) {
				h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/binding", Obj: binding})
			}, wantActivated: true},
		{name: "another pod is bound: not activated, still waiting", informer: []*corev1.Pod{binding, other, preemptor}, held: []*corev1.Pod{binding}, since: time.Now(),
			event: func(h cache.ResourceEventHandler) { h.OnUpdate(other, otherBound) }, wantWaiting: true},
		{name: "a held pod's status changes, still unbound: not activated", informer: []*corev1.Pod{binding, preemptor}, held: []*corev1.Pod{binding}, since: time.Now(),
			event: func(h cache.ResourceEventHandler) { h.OnUpdate(binding, binding.DeepCopy()) }, wantWaiting: true},
		{name: "bound before the wait was recorded: activated at once, not remembered", informer: []*corev1.Pod{boundNow, preemptor}, held: []*corev1.Pod{binding},
			wantAtOnce: true},
		{name: "a wait older than forgetAfter is forgotten on the next event", informer: []*corev1.Pod{binding, other, preemptor}, held: []*corev1.Pod{binding},
			since: time.Now().Add(-forgetAfter - time.Second), event: func(h cache.ResourceEventHandler) { h.OnUpdate(other, otherBound) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var activated []string
			h := activations{surveyHandle: newSurveyHandle(t, nil), activated: &activated}
			p := wired(&Preemption{handle: h, pods: informerOf(tc.informer)})
			held := map[types.UID]podRef{}
			for _, pod := range tc.held {
				held[pod.UID] = ref(pod)
			}
			p.evictions.awaitSettling(klog.Background(), preemptor, held)
			if tc.wantAtOnce {
				assert.Equal(t, []string{"ns/high"}, activated, "activated at once")
				assert.Empty(t, p.evictions.settling, "remembered")
				return
			}
			assert.Empty(t, activated, "activated before any event")
			if !tc.since.IsZero() {
				p.evictions.settling[preemptor.UID].since = tc.since
			}
			tc.event(p.evictions.settlingHandler(klog.Background()))
			if tc.wantActivated {
				assert.Equal(t, []string{"ns/high"}, activated)
			} else {
				assert.Empty(t, activated)
			}
			_, waiting := p.evictions.settling[preemptor.UID]
			assert.Equal(t, tc.wantWaiting, waiting, "still waiting")
		})
	}
}
