package gang

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-base/metrics/testutil"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

// Permit holds members short of the quorum for the PodGroup's timeout (or
// the plugin's), and the member that completes it lets every waiting
// sibling bind and counts the gang admitted in its queue's histogram.
func TestPermit(t *testing.T) {
	registerMetrics()
	timed := podGroup("timed", t0, 2)
	timed.Spec.ScheduleTimeoutSeconds = ptr.To[int32](7)
	tests := []struct {
		name        string
		group       *schedv1alpha1.PodGroup
		reserved    int // members reserved before the one permitted (which is reserved too)
		wantCode    fwk.Code
		wantTimeout time.Duration
		wantAllowed bool
	}{
		{name: "short of quorum: wait the plugin's time", group: podGroup("g", t0, 3), reserved: 1, wantCode: fwk.Wait, wantTimeout: time.Minute},
		{name: "short of quorum: wait the PodGroup's scheduleTimeoutSeconds", group: timed, reserved: 0, wantCode: fwk.Wait, wantTimeout: 7 * time.Second},
		{name: "quorum placed: every waiting sibling is allowed", group: podGroup("g", t0, 3), reserved: 2, wantCode: fwk.Success, wantAllowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := members(tt.group.Name, 3, "1")
			g, h := testGang(t, []*schedv1alpha1.PodGroup{tt.group}, pods)
			g.permitWait = time.Minute
			ctx := context.Background()
			// The attempt starts as the scheduler starts it: PreFilter.
			_, status := g.PreFilter(ctx, framework.NewCycleState(), pods[0], []fwk.NodeInfo{nodeInfo("n0", "8")})
			require.True(t, status.IsSuccess(), status.Message())
			for _, p := range pods[:tt.reserved] {
				require.Nil(t, g.Reserve(ctx, nil, p, "n0"))
				h.waiting[p.UID] = &fakeWaitingPod{pod: p}
			}
			last := pods[tt.reserved]
			require.Nil(t, g.Reserve(ctx, nil, last, "n0"))
			admittedBefore, err := testutil.GetHistogramMetricCount(queueAdmissionSeconds.WithLabelValues(""))
			require.NoError(t, err)
			status, timeout := g.Permit(ctx, nil, last, "n0")
			assert.Equal(t, tt.wantCode, status.Code(), status.Message())
			admitted, err := testutil.GetHistogramMetricCount(queueAdmissionSeconds.WithLabelValues(""))
			require.NoError(t, err)
			if tt.wantAllowed {
				assert.Equal(t, admittedBefore+1, admitted, "the gang's admission observed once")
			} else {
				assert.Equal(t, admittedBefore, admitted, "no admission short of the quorum")
			}
			if tt.wantCode == fwk.Wait {
				assert.Equal(t, tt.wantTimeout, timeout)
			}
			for _, wp := range h.waiting {
				assert.Equal(t, tt.wantAllowed, wp.allowed, wp.pod.Name)
			}
		})
	}
}

// A reserved member losing its place (Unreserve) or a member that cannot
// be placed (PostFilter) fails the attempt once: the waiting siblings are
// rejected, the gang backs off and the PodGroup says why. Later failures
// of the same attempt, and failures after the quorum, change nothing.
func TestFailedAttempt(t *testing.T) {
	key := state.GroupKey{Namespace: "ns", Name: "g"}
	tests := []struct {
		name         string
		reserved     int
		fail         func(g *Gang, pods []*corev1.Pod)
		wantRejected bool
		wantBackoff  bool
		wantEvent    string
	}{
		{name: "a reserved member loses its place", reserved: 2, fail: func(g *Gang, pods []*corev1.Pod) {
			g.Unreserve(context.Background(), nil, pods[1], "n0")
		}, wantRejected: true, wantBackoff: true, wantEvent: "lost its place"},
		{name: "a member cannot be placed", reserved: 1, fail: func(g *Gang, pods []*corev1.Pod) {
			g.PostFilter(context.Background(), framework.NewCycleState(), pods[2], nil)
		}, wantRejected: true, wantBackoff: true, wantEvent: "could not be placed"},
		{name: "unreserving a member never reserved", reserved: 1, fail: func(g *Gang, pods []*corev1.Pod) {
			g.Unreserve(context.Background(), nil, pods[2], "n0")
		}},
		{name: "quorum reached, no attempt under way: a surplus member failing undoes nothing", reserved: 3, fail: func(g *Gang, pods []*corev1.Pod) {
			g.PostFilter(context.Background(), framework.NewCycleState(), members("g", 4, "1")[3], nil)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pods := members("g", 3, "1")
			g, h := testGang(t, []*schedv1alpha1.PodGroup{podGroup("g", t0, 3)}, pods)
			g.backoff = time.Minute
			ctx := context.Background()
			nodes := []fwk.NodeInfo{nodeInfo("n0", "8")}
			_, status := g.PreFilter(ctx, framework.NewCycleState(), pods[0], nodes)
			require.True(t, status.IsSuccess(), status.Message())
			for _, p := range pods[:tt.reserved] {
				require.Nil(t, g.Reserve(ctx, nil, p, "n0"))
				if s, _ := g.Permit(ctx, nil, p, "n0"); s.Code() == fwk.Wait {
					h.waiting[p.UID] = &fakeWaitingPod{pod: p}
				}
			}
			tt.fail(g, pods)
			for _, wp := range h.waiting {
				assert.Equal(t, tt.wantRejected, wp.rejected, wp.pod.Name)
			}
			var backoff time.Duration
			g.store.Lock(func(locked *state.Locked) { backoff, _ = locked.BackingOff(locked.Gang(key)) })
			assert.Equal(t, tt.wantBackoff, backoff > 0)
			var events []string
			for len(h.recorder.Events) > 0 {
				events = append(events, <-h.recorder.Events)
			}
			if tt.wantEvent == "" {
				assert.Empty(t, events)
				return
			}
			require.Len(t, events, 1, "one GangRejected event per failed attempt")
			assert.Contains(t, events[0], "GangRejected")
			assert.Contains(t, events[0], tt.wantEvent)
			// A second failure of the same attempt changes nothing more.
			g.Unreserve(ctx, nil, pods[0], "n0")
			assert.Empty(t, h.recorder.Events)
		})
	}
}
