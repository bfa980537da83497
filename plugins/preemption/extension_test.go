package preemption

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/reasons"
)

// The extension points' contracts, each by table: what PreEnqueue holds
// back, what EventsToRegister lets in, and what PostFilter refuses before
// it searches for victims.

// evictionFixture is a plugin with one eviction in flight for a gang's
// leader and workers (victims: a cpu pod and a GPU pod), and a pods
// informer holding the pods given.
func evictionFixture(t *testing.T, informer ...*corev1.Pod) (*Preemption, map[string]*corev1.Pod) {
	t.Helper()
	mk := func(name, group, node string, req map[corev1.ResourceName]string) *corev1.Pod {
		w := st.MakePod().Namespace("ns").Name(name).UID(name).Req(req)
		if group != "" {
			w = w.Label(schedv1alpha1.PodGroupLabel, group)
		}
		if node != "" {
			w = w.Node(node)
		}
		return w.Obj()
	}
	cpu := map[corev1.ResourceName]string{corev1.ResourceCPU: "4", corev1.ResourceMemory: "16Gi"}
	gpu := map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "64Gi", "nvidia.com/gpu": "4"}
	pods := map[string]*corev1.Pod{
		"leader":     mk("leader", "train", "", cpu),
		"worker":     mk("worker", "train", "", gpu),
		"lone":       mk("lone", "", "", cpu),
		"victim-cpu": mk("victim-cpu", "", "n1", cpu),
		"victim-gpu": mk("victim-gpu", "", "n2", gpu),
		"bystander":  mk("bystander", "", "n3", cpu),
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, name := range informer {
		require.NoError(t, indexer.Add(name))
	}
	ref := func(name string) podRef {
		p := pods[name]
		return podRef{namespace: p.Namespace, name: p.Name, node: p.Spec.NodeName, uid: p.UID}
	}
	p := wired(&Preemption{pods: corelisters.NewPodLister(indexer), store: state.NewStatic(nil, nil)}, map[string]*eviction{
		"gang/ns/train": {victims: []podRef{ref("victim-cpu"), ref("victim-gpu")}, members: []podRef{ref("leader"), ref("worker")}, started: time.Now()},
	})
	return p, pods
}

// PreEnqueue holds a preemptor's gang members back while their victims
// are still there, saying how many; others pass.
func TestPreEnqueue(t *testing.T) {
	tests := []struct {
		name     string
		informer []string
		pod      string
		wantHeld string // "" for admitted
	}{
		{name: "the leader, both victims still there", informer: []string{"victim-cpu", "victim-gpu"}, pod: "leader", wantHeld: "waiting for 2 pods evicted to make room for it to terminate"},
		{name: "a worker of another shape, one victim left", informer: []string{"victim-gpu"}, pod: "worker", wantHeld: "waiting for 1 pods evicted"},
		{name: "the victims gone: the gang is let in", pod: "leader"},
		{name: "a pod no eviction is for", informer: []string{"victim-cpu", "victim-gpu"}, pod: "lone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, pods := evictionFixture(t)
			var informer []*corev1.Pod
			for _, n := range tt.informer {
				informer = append(informer, pods[n])
			}
			p, _ := evictionFixture(t, informer...)
			status := p.PreEnqueue(context.Background(), pods[tt.pod])
			if tt.wantHeld == "" {
				assert.True(t, status.IsSuccess(), "admitted: %v", status)
				return
			}
			assert.Equal(t, fwk.UnschedulableAndUnresolvable, status.Code())
			assert.Contains(t, status.Message(), tt.wantHeld)
			assert.Equal(t, reasons.PreemptionPending, reasons.Of(status.Message()))
		})
	}
}

// EventsToRegister lets a held preemptor in on the deletion of one of its
// own victims only.
func TestEventsToRegister(t *testing.T) {
	p, pods := evictionFixture(t)
	events, err := p.EventsToRegister(context.Background())
	require.NoError(t, err)
	require.Len(t, events, 1)
	assert.Equal(t, fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, events[0].Event)
	hint := events[0].QueueingHintFn
	tests := []struct {
		name string
		pod  string
		gone interface{}
		want fwk.QueueingHint
	}{
		{name: "the leader's victim deleted", pod: "leader", gone: pods["victim-cpu"], want: fwk.Queue},
		{name: "the worker's gang's other victim deleted", pod: "worker", gone: pods["victim-gpu"], want: fwk.Queue},
		{name: "a bystander deleted: the leader still waits", pod: "leader", gone: pods["bystander"], want: fwk.QueueSkip},
		{name: "a pod waiting for no eviction: any deletion", pod: "lone", gone: pods["bystander"], want: fwk.Queue},
		{name: "not a pod: tried", pod: "leader", gone: "tombstone", want: fwk.Queue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := hint(klog.Background(), pods[tt.pod], tt.gone, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

// PostFilter refuses, before any search, a pod that may not preempt, a
// gang not waiting for room, and a preemptor whose victims are still
// leaving; the last keeps its nomination, the others drop it.
func TestPostFilterRefusals(t *testing.T) {
	never := corev1.PreemptNever
	tests := []struct {
		name           string
		pod            func(map[string]*corev1.Pod) *corev1.Pod
		informer       []string
		wantMessage    string
		wantKeepsNomin bool
	}{
		{name: "preemptionPolicy Never", pod: func(p map[string]*corev1.Pod) *corev1.Pod {
			pod := p["lone"].DeepCopy()
			pod.Spec.PreemptionPolicy = &never
			return pod
		}, wantMessage: "not preempting: the pod's preemptionPolicy is Never", wantKeepsNomin: true},
		{name: "a gang member whose gang is not waiting for room", pod: func(p map[string]*corev1.Pod) *corev1.Pod { return p["worker"] },
			wantMessage: "not preempting: gang ns/train is not waiting for room"},
		{name: "a pod whose victims are still leaving keeps its nomination", pod: func(p map[string]*corev1.Pod) *corev1.Pod { return p["lone"] },
			informer: []string{"victim-cpu", "lone"}, wantMessage: "not preempting again: 1 victims evicted for pod ns/lone are still terminating", wantKeepsNomin: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, pods := evictionFixture(t)
			var informer []*corev1.Pod
			for _, n := range tt.informer {
				informer = append(informer, pods[n])
			}
			p, _ := evictionFixture(t, informer...)
			p.evictions.inFlight["lone"] = &eviction{victims: []podRef{{namespace: "ns", name: "victim-cpu", node: "n1", uid: "victim-cpu"}}, started: time.Now()}
			pg := &schedv1alpha1.PodGroup{}
			pg.Namespace, pg.Name, pg.Spec.MinMember = "ns", "train", 2
			p.store = state.NewStatic([]*schedv1alpha1.PodGroup{pg}, []*corev1.Pod{pods["leader"], pods["worker"]})
			result, status := p.PostFilter(context.Background(), framework.NewCycleState(), tt.pod(pods), framework.NewDefaultNodeToStatus())
			assert.Equal(t, fwk.Unschedulable, status.Code())
			assert.Contains(t, status.Message(), tt.wantMessage)
			if tt.wantKeepsNomin {
				assert.Nil(t, result)
			} else {
				assert.Same(t, dropNomination, result)
			}
		})
	}
}
