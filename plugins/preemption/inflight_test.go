package preemption

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
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
			p := &Preemption{pods: corelisters.NewPodLister(indexer), inFlight: map[string]*eviction{
				"gang/ns/g": {victims: []podRef{ref(victim)}, members: []podRef{ref(unplaced)}, queue: "q", started: tc.started, victimsGone: tc.victimsGone},
			}}

			leaving, claims := p.pending("another")

			assert.Len(t, leaving, tc.wantLeaving, "victims leaving")
			assert.Len(t, claims, tc.wantClaims, "claims")
			for _, c := range claims {
				assert.Equal(t, "q", c.queue)
			}
			_, inFlight := p.inFlight["gang/ns/g"]
			assert.Equal(t, tc.wantInFlight, inFlight, "still remembered")
		})
	}
}
