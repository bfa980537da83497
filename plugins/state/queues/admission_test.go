package queues

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// A tree of two teams under one org: org (cap 10 cpu) with team-a and
// team-b, each deserving 5 cpu, team-a holding 4.
func teamsView() *QueueView {
	info := func(name, parent string, deserved, allocated, capability int64) *QueueInfo {
		q := &QueueInfo{Name: name, Parent: parent, Deserved: capacity.Resources{corev1.ResourceCPU: deserved}, Allocated: capacity.Resources{corev1.ResourceCPU: allocated}}
		if capability > 0 {
			q.Capability = capacity.Resources{corev1.ResourceCPU: capability}
		}
		return q
	}
	return &QueueView{Available: capacity.Resources{corev1.ResourceCPU: 20000}, Queues: map[string]*QueueInfo{
		"org":    info("org", "", 10000, 4000, 10000),
		"team-a": info("team-a", "org", 5000, 4000, 0),
		"team-b": info("team-b", "org", 5000, 0, 0),
	}}
}

// Refuses names the first queue on the path a request would overrun, once
// what leaves is given back; RefusingLevels names every one.
func TestRefuses(t *testing.T) {
	cpu := func(m int64) capacity.Resources { return capacity.Resources{corev1.ResourceCPU: m} }
	tests := []struct {
		name        string
		queue       string
		request     capacity.Resources
		released    Released
		wantQueue   string
		wantLevels  []string
		wantReason  reasons.Reason
		wantMessage string
	}{
		{name: "within its share", queue: "team-a", request: cpu(1000)},
		{name: "over its own share", queue: "team-a", request: cpu(2000), wantQueue: "team-a", wantLevels: []string{"team-a"}, wantReason: reasons.QueueOverShare},
		{name: "what leaves is given back first", queue: "team-a", request: cpu(2000), released: Released{"team-a": cpu(1000), "org": cpu(1000)}},
		{name: "over its share and its parent's capability", queue: "team-b", request: cpu(7000), wantQueue: "team-b", wantLevels: []string{"team-b", "org"}, wantReason: reasons.QueueOverShare},
		{name: "a parent's own pods stop at its capability", queue: "org", request: cpu(7000), wantQueue: "org", wantLevels: []string{"org"}, wantReason: reasons.QueueCapability, wantMessage: overCapability},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := teamsView()
			released := tt.released
			if released == nil {
				released = Released{}
			}
			queue, reason := v.Refuses(tt.queue, tt.request, released)
			assert.Equal(t, tt.wantQueue, queue, reason)
			levels := v.RefusingLevels(tt.queue, tt.request, released)
			var got []string
			for _, q := range v.Ancestors(tt.queue) {
				if _, ok := levels[q.Name]; ok {
					got = append(got, q.Name)
				}
			}
			assert.Equal(t, tt.wantLevels, got)
			if tt.wantQueue == "" {
				assert.Empty(t, reason)
				return
			}
			assert.Equal(t, tt.wantReason, RefusalReason(reason), reason)
			assert.Contains(t, reason, tt.wantMessage)
		})
	}
}

// Release counts what a pod gives back in its queue and every ancestor.
func TestRelease(t *testing.T) {
	v := teamsView()
	released := Released{}
	v.Release(released, "team-a", capacity.Resources{corev1.ResourceCPU: 1000})
	v.Release(released, "team-b", capacity.Resources{corev1.ResourceCPU: 500})
	assert.Equal(t, Released{"team-a": {corev1.ResourceCPU: 1000}, "team-b": {corev1.ResourceCPU: 500}, "org": {corev1.ResourceCPU: 1500}}, released)
}

// Charge counts room held for a queue's gangs against it and every
// ancestor, as if allocated: team-a, 4 of its 5 cpu used, holding 1 cpu
// idle for a gang, admits no more; team-b, beside it under org, still
// admits its share, and what leaves team-a is given back beside the
// charge.
func TestCharge(t *testing.T) {
	cpu := func(m int64) capacity.Resources { return capacity.Resources{corev1.ResourceCPU: m} }
	v := teamsView()
	charged := Released{}
	v.Charge(charged, "team-a", cpu(1000))
	assert.Equal(t, Released{"team-a": cpu(-1000), "org": cpu(-1000)}, charged)
	queue, reason := v.Refuses("team-a", cpu(500), charged)
	assert.Equal(t, "team-a", queue)
	assert.Contains(t, reason, "would exceed its deserved share of cpu (5500m > 5)")
	queue, reason = v.Refuses("team-b", cpu(5000), charged)
	assert.Empty(t, queue, reason)
	v.Release(charged, "team-a", cpu(500))
	queue, reason = v.Refuses("team-a", cpu(500), charged)
	assert.Empty(t, queue, reason)
}

// Sides split two queues' paths where they part: siblings each have their
// own side, a parent's own pods none.
func TestSides(t *testing.T) {
	names := func(qs []*QueueInfo) []string {
		var out []string
		for _, q := range qs {
			out = append(out, q.Name)
		}
		return out
	}
	v := teamsView()
	from, to := v.Sides("team-a", "team-b")
	assert.Equal(t, []string{"team-a"}, names(from))
	assert.Equal(t, []string{"team-b"}, names(to))
	from, to = v.Sides("team-a", "org")
	assert.Equal(t, []string{"team-a"}, names(from))
	assert.Empty(t, to, "the parent is on both paths")
}
