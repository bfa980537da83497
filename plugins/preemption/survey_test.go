package preemption

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// surveyHandle is the framework's handle with the pods waiting in Permit
// as the test says, which is what survey reads.
type surveyHandle struct {
	fwk.Handle
	waiting map[types.UID]bool
	// binding are the pods in the framework's binding map: binding, or
	// bound with their binding cycle not yet returned.
	binding map[types.UID]bool
}

func newSurveyHandle(t testing.TB, waiting map[types.UID]bool) surveyHandle {
	return surveyHandle{Handle: handletest.New(t, "flotilla-scheduler"), waiting: waiting}
}

func (h surveyHandle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	if h.waiting[uid] {
		return waitingPod{}
	}
	return nil
}

func (h surveyHandle) GetPodInPreBind(uid types.UID) fwk.PodInPreBind {
	if h.binding[uid] {
		return podInPreBind{}
	}
	return nil
}

type waitingPod struct{ fwk.WaitingPod }

type podInPreBind struct{ fwk.PodInPreBind }

// informerOf is a pods lister holding the pods, those named unbound shown
// not yet bound (their binding under way).
func informerOf(pods []*corev1.Pod, unbound ...string) corelisters.PodLister {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, pod := range pods {
		if slices.Contains(unbound, pod.Name) {
			pod = pod.DeepCopy()
			pod.Spec.NodeName = ""
		}
		_ = indexer.Add(pod)
	}
	return corelisters.NewPodLister(indexer)
}

func running(name string, priority int32, group string) *corev1.Pod {
	w := st.MakePod().Namespace("ns").Name(name).UID(name).Priority(priority).Node("n").
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "1", corev1.ResourceMemory: "1Gi"})
	if group != "" {
		w = w.Label(schedv1alpha1.PodGroupLabel, group)
	}
	return w.Obj()
}

func startedLater(pod *corev1.Pod) *corev1.Pod {
	pod.Status.StartTime = &metav1.Time{Time: time.Now()}
	return pod
}

// survey turns the pods on the nodes into victim units: who may be
// evicted at all, what goes together, in which order.
func TestSurvey(t *testing.T) {
	groups := []*schedv1alpha1.PodGroup{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "surplus"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "exact"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "roles", UID: "roles", Annotations: map[string]string{flotillav1alpha1.RolesAnnotation: `[
			{"name": "leader", "minMember": 1, "selector": {"matchLabels": {"role": "leader"}}},
			{"name": "workers", "minMember": 2, "selector": {"matchLabels": {"role": "worker"}}}]`}},
			Spec: schedv1alpha1.PodGroupSpec{MinMember: 3}},
	}
	withRole := func(pod *corev1.Pod, role string) *corev1.Pod {
		pod.Labels["role"] = role
		return pod
	}
	terminating := running("terminating", 0, "")
	terminating.DeletionTimestamp = &metav1.Time{}
	tests := []struct {
		name            string
		pods            []*corev1.Pod
		waiting         []string
		binding         []string // in the binding map; bound in the informer unless unbound
		unbound         []string
		preemptor       *corev1.Pod
		want            []string // units, least important first; "+" joins a whole gang
		wantTerminating int
		wantHeld        []string // evictable but in flight: the preemption waits for them
	}{
		{name: "lower priority only, least important first",
			pods:      []*corev1.Pod{running("high", 100, ""), running("low", 1, ""), running("lowest", 0, "")},
			preemptor: running("p", 50, ""), want: []string{"lowest", "low"}},
		{name: "a gang loses surplus members one by one (the newest), else the whole gang",
			pods:      []*corev1.Pod{running("s-0", 1, "surplus"), running("s-1", 1, "surplus"), startedLater(running("s-2", 1, "surplus")), running("e-0", 1, "exact"), running("e-1", 1, "exact")},
			preemptor: running("p", 50, ""), want: []string{"s-2", "e-0+e-1", "s-0+s-1+s-2"}},
		{name: "with roles, only members above their role's minimum go one by one: the newest leader is not surplus",
			pods: []*corev1.Pod{withRole(startedLater(running("r-l", 1, "roles")), "leader"),
				withRole(running("r-w0", 1, "roles"), "worker"), withRole(running("r-w1", 1, "roles"), "worker"),
				withRole(running("r-w2", 1, "roles"), "worker"), withRole(running("r-w3", 1, "roles"), "worker")},
			preemptor: running("p", 50, ""), want: []string{"r-w0", "r-w1", "r-l+r-w0+r-w1+r-w2+r-w3"}},
		{name: "a gang with a member waiting in Permit is never a victim as a whole",
			pods:    []*corev1.Pod{running("e-0", 1, "exact"), running("e-1", 1, "exact"), running("low", 1, "")},
			waiting: []string{"e-1"}, preemptor: running("p", 50, ""), want: []string{"low"}, wantHeld: []string{"e-1"}},
		{name: "a pod still binding is no victim, and is held",
			pods:    []*corev1.Pod{running("binding", 1, ""), running("low", 1, "")},
			binding: []string{"binding"}, unbound: []string{"binding"},
			preemptor: running("p", 50, ""), want: []string{"low"}, wantHeld: []string{"binding"}},
		{name: "a pod the informer shows bound is a victim, though its binding cycle has not returned",
			pods:    []*corev1.Pod{running("just-bound", 1, "")},
			binding: []string{"just-bound"}, preemptor: running("p", 50, ""), want: []string{"just-bound"}},
		{name: "a pod in flight the preemptor may not evict is not held",
			pods:    []*corev1.Pod{running("higher", 60, ""), running("low", 1, "")},
			binding: []string{"higher"}, unbound: []string{"higher"},
			preemptor: running("p", 50, ""), want: []string{"low"}},
		{name: "terminating pods are room being freed, not victims",
			pods:      []*corev1.Pod{terminating, running("low", 1, "")},
			preemptor: running("p", 50, ""), want: []string{"low"}, wantTerminating: 1},
		{name: "the preemptor's own gang is never its victim",
			pods:      []*corev1.Pod{running("m-0", 1, "mine"), running("low", 1, "")},
			preemptor: running("m-1", 50, "mine"), want: []string{"low"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := framework.NewNodeInfo(tt.pods...)
			node.SetNode(st.MakeNode().Name("n").Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi"}).Obj())
			uids := func(names []string) map[types.UID]bool {
				out := map[types.UID]bool{}
				for _, name := range names {
					out[types.UID(name)] = true
				}
				return out
			}
			handle := newSurveyHandle(t, uids(tt.waiting))
			handle.binding = uids(tt.binding)
			p := wired(&Preemption{
				handle: handle, store: readState(state.NewStatic(groups, tt.pods)), pods: informerOf(tt.pods, tt.unbound...),
				pdbs: policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
			})
			who := &preemptor{pod: tt.preemptor, members: []*corev1.Pod{tt.preemptor}, priority: *tt.preemptor.Spec.Priority, request: capacity.Request(tt.preemptor)}
			if key, ok := state.GroupOf(tt.preemptor); ok {
				who.group, who.inGroup = key, true
			}
			unitNames := func(units []*unit) []string {
				var got []string
				for _, u := range units {
					var names []string
					for _, m := range u.members {
						names = append(names, m.info.GetPod().Name)
					}
					got = append(got, strings.Join(names, "+"))
				}
				return got
			}
			heldNames := func(w *world) []string {
				var got []string
				for _, ref := range w.held.pods {
					got = append(got, ref.name)
				}
				slices.Sort(got)
				return got
			}
			w, err := p.survey(context.Background(), who, []fwk.NodeInfo{node}, false)
			require.NoError(t, err)
			assert.Equal(t, tt.want, unitNames(w.units))
			assert.Len(t, w.terminating["n"], tt.wantTerminating)
			assert.Equal(t, tt.wantHeld, heldNames(w), "held in flight")

			// Surveyed for one pod, the single pods become units when
			// their node is planned: the same units, in the same order.
			lazy, err := p.survey(context.Background(), who, []fwk.NodeInfo{node}, true)
			require.NoError(t, err)
			assert.Equal(t, tt.want, unitNames(lazy.unitsAt("n")), "units made on demand")
			assert.Len(t, lazy.terminatingOn("n"), tt.wantTerminating)
			assert.Equal(t, tt.wantHeld, heldNames(lazy), "held in flight, surveyed on demand")
		})
	}
}

// Surveyed for one pod on a cluster with PodGroups, the gangs are found
// through their members, not by reading every node: the same units as a
// survey of every pod, a gang's spanning nodes, a member held in Permit
// (bound in the snapshot only, as the scheduler assumes it) keeping its
// gang from being a victim as a whole.
func TestSurveyOnDemandFindsGangsThroughTheirMembers(t *testing.T) {
	groups := []*schedv1alpha1.PodGroup{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "spread"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "placing"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 2}},
	}
	on := func(pod *corev1.Pod, node string) *corev1.Pod {
		pod = pod.DeepCopy()
		pod.Spec.NodeName = node
		return pod
	}
	spread0, spread1 := on(running("s-0", 1, "spread"), "n1"), on(running("s-1", 1, "spread"), "n2")
	placing0 := on(running("p-0", 1, "placing"), "n1")
	placing1 := on(running("p-1", 1, "placing"), "") // waiting in Permit: not bound in the informer
	orphan := on(running("o-0", 1, "no-podgroup"), "n1")
	low := on(running("low", 1, ""), "n2")

	newNode := func(name string, pods ...*corev1.Pod) fwk.NodeInfo {
		n := framework.NewNodeInfo(pods...)
		n.SetNode(st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi"}).Obj())
		return n
	}
	nodes := []fwk.NodeInfo{
		newNode("n1", spread0, placing0, orphan),
		newNode("n2", spread1, on(placing1, "n2"), low), // the scheduler's assumed view
	}
	p := wired(&Preemption{
		handle: newSurveyHandle(t, map[types.UID]bool{"p-1": true}),
		store:  readState(state.NewStatic(groups, []*corev1.Pod{spread0, spread1, placing0, placing1, orphan, low})),
		pdbs:   policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	})
	pod := running("p", 50, "")
	who := &preemptor{pod: pod, members: []*corev1.Pod{pod}, priority: 50, request: capacity.Request(pod)}
	names := func(units []*unit) []string {
		var got []string
		for _, u := range units {
			var members []string
			for _, m := range u.members {
				members = append(members, m.info.GetPod().Name+"@"+m.node)
			}
			got = append(got, strings.Join(members, "+"))
		}
		return got
	}

	everyPod, err := p.survey(context.Background(), who, nodes, false)
	require.NoError(t, err)
	lazy, err := p.survey(context.Background(), who, nodes, true)
	require.NoError(t, err)
	assert.Equal(t, []string{"s-0@n1+s-1@n2"}, names(lazy.units), "the gangs' units, found through their members")
	want := map[string][]string{
		"n1": {"o-0@n1", "s-0@n1+s-1@n2"}, // a pod whose PodGroup does not exist is a single pod
		"n2": {"low@n2", "s-0@n1+s-1@n2"},
	}
	for node, units := range want {
		assert.Equal(t, units, names(everyPod.unitsAt(node)), "surveying every pod, on %s", node)
		assert.Equal(t, units, names(lazy.unitsAt(node)), "on demand, on %s", node)
	}
}
