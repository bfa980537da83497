package preemption

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/parallelize"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"

	"github.com/flotilla-sched/flotilla/internal/handletest"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/planner"
)

const rackLabel = "example.com/rack"

// passingHandle is a framework whose other plugins pass every node: the
// simulation then turns on resources alone, which is what the domain
// choice is about.
type passingHandle struct{ surveyHandle }

func (passingHandle) RunFilterPluginsWithNominatedPods(context.Context, fwk.CycleState, *corev1.Pod, fwk.NodeInfo) *fwk.Status {
	return nil
}

func (passingHandle) RunPreFilterExtensionRemovePod(context.Context, fwk.CycleState, *corev1.Pod, fwk.PodInfo, fwk.NodeInfo) *fwk.Status {
	return nil
}

func (passingHandle) RunPreFilterExtensionAddPod(context.Context, fwk.CycleState, *corev1.Pod, fwk.PodInfo, fwk.NodeInfo) *fwk.Status {
	return nil
}

// slottedNode is a node of 8 cpu, 32Gi and the given pod slots, running
// the pods.
func slottedNode(name, slots string, pods ...*corev1.Pod) fwk.NodeInfo {
	ni := framework.NewNodeInfo(pods...)
	ni.SetNode(st.MakeNode().Name(name).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", corev1.ResourcePods: slots}).Obj())
	return ni
}

// onNodes is the plugin over the pods running on the nodes, every other
// plugin passing every node.
func onNodes(t testing.TB, nodes []fwk.NodeInfo) *Preemption {
	var pods []*corev1.Pod
	for _, n := range nodes {
		for _, info := range n.GetPods() {
			pods = append(pods, info.GetPod())
		}
	}
	return wired(&Preemption{
		handle: passingHandle{newSurveyHandle(t, map[types.UID]bool{})}, store: readState(state.NewStatic(nil, pods)),
		pdbs: policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	})
}

// wholeNodePod asks for 7 of a node's 8 cpu, and 1Gi.
func wholeNodePod(name string, priority int32, node string) *corev1.Pod {
	w := st.MakePod().Namespace("ns").Name(name).UID(name).Priority(priority).
		Req(map[corev1.ResourceName]string{corev1.ResourceCPU: "7", corev1.ResourceMemory: "1Gi"})
	if node != "" {
		w = w.Node(node)
	}
	return w.Obj()
}

// runningPod is where a pod of a test runs, and its priority.
type runningPod struct {
	node     string
	priority int32
}

// domainNodes builds nodes of 8 cpu, 32Gi and 110 pod slots, labelled
// with their domain (domain value -> node names) under label, sorted by
// name, running whole-node pods (name -> node and priority). It returns
// the nodes, the pods, and each node's domain.
func domainNodes(label string, domains map[string][]string, running map[string]runningPod) ([]fwk.NodeInfo, []*corev1.Pod, map[string]string) {
	var pods []*corev1.Pod
	for name, r := range running {
		pods = append(pods, wholeNodePod(name, r.priority, r.node))
	}
	var nodes []fwk.NodeInfo
	domainOf := map[string]string{}
	for domain, names := range domains {
		for _, name := range names {
			domainOf[name] = domain
			var on []*corev1.Pod
			for _, p := range pods {
				if p.Spec.NodeName == name {
					on = append(on, p)
				}
			}
			ni := framework.NewNodeInfo(on...)
			ni.SetNode(st.MakeNode().Name(name).Label(label, domain).
				Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", corev1.ResourcePods: "110"}).Obj())
			nodes = append(nodes, ni)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node().Name < nodes[j].Node().Name })
	return nodes, pods, domainOf
}

// countingHandle passes every node but those it refuses, as passingHandle,
// and records which nodes were planned (their pods asked whether they are
// waiting in Permit) and which simulated; it lists the test's nodes and runs
// in parallel as the scheduler does.
type countingHandle struct {
	passingHandle
	snapshot      fwk.SharedLister
	refuse        map[string]bool
	mu            *sync.Mutex
	simulatedOn   map[string]bool
	askedWhoWaits map[types.UID]bool
}

func (h countingHandle) RunFilterPluginsWithNominatedPods(_ context.Context, _ fwk.CycleState, _ *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.simulatedOn[ni.Node().Name] = true
	if h.refuse[ni.Node().Name] {
		return fwk.NewStatus(fwk.Unschedulable, "refused by the test")
	}
	return nil
}

func (h countingHandle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.askedWhoWaits[uid] = true
	return nil
}

func (h countingHandle) SnapshotSharedLister() fwk.SharedLister { return h.snapshot }

func (h countingHandle) Parallelizer() fwk.Parallelizer { return parallelize.NewParallelizer(16) }

// inOneDomain is the topology of a gang whose members must share one
// value of level, pinned to those values (nil: any).
func inOneDomain(level string, pinned []string) *planner.Topology {
	return &planner.Topology{Required: level, Levels: []string{level}, Pinned: pinned}
}

// wired gives a plugin a test builds the evictions New gives it, over the
// plugin's own handle, store and pods lister, with those in flight given.
func wired(p *Preemption, inFlight ...map[string]*eviction) *Preemption {
	p.evictions = newEvictions(p.handle, p.store, p.pods)
	for _, in := range inFlight {
		p.evictions.inFlight = in
	}
	return p
}

// clusterPreemption is Preemption on a cluster of nodes of 8 cpu and 32Gi
// (n-0, n-1, ...) running the running pods, whose filters pass, with all
// the pods (pending ones too) in its lister and a fake API.
func clusterPreemption(t *testing.T, store *state.Store, nodeCount int, running, all []*corev1.Pod) *Preemption {
	t.Helper()
	var nodes []*corev1.Node
	for i := range nodeCount {
		nodes = append(nodes, st.MakeNode().Name(fmt.Sprintf("n-%d", i)).Capacity(map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "32Gi", corev1.ResourcePods: "110"}).Obj())
	}
	podIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	var objects []runtime.Object
	for _, pod := range all {
		require.NoError(t, podIndex.Add(pod))
		objects = append(objects, pod)
	}
	handle := handletest.New(t, "flotilla-scheduler",
		frameworkruntime.WithSnapshotSharedLister(schedcache.NewSnapshot(running, nodes)),
		frameworkruntime.WithClientSet(fake.NewClientset(objects...)),
		frameworkruntime.WithEventRecorder(events.NewFakeRecorder(100)))
	return wired(&Preemption{
		handle: passingHandle{surveyHandle{Handle: handle}},
		store:  readState(store),
		pods:   corelisters.NewPodLister(podIndex),
		pdbs:   policylisters.NewPodDisruptionBudgetLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
	})
}
