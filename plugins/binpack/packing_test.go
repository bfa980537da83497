package binpack

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/flotilla-sched/flotilla/apis/config"
	"github.com/flotilla-sched/flotilla/internal/report"
)

var packingReport = flag.String("packing-report", "", "replace the packing-quality section of this markdown file (docs/benchmarks.md) with the new table")

// The packing-quality comparison places one mixed workload, in arrival
// order, onto heterogeneous nodes through the real framework runtime
// (NodeResourcesFit filtering, then the strategy's scores), once per scoring
// strategy. Ties go to the first node in name order, so each run is exact
// and repeatable.

// weights are the same for every strategy, so only the scoring rule differs.
var packingWeights = []config.ResourceWeight{
	{Name: corev1.ResourceCPU, Weight: 1}, {Name: corev1.ResourceMemory, Weight: 1}, {Name: gpu, Weight: 4},
}

type packingStrategy struct {
	name    string
	plugins func() []tf.RegisterPluginFunc
}

func fitFactory(strategy *schedconfig.ScoringStrategy) frameworkruntime.PluginFactory {
	return func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args := &schedconfig.NodeResourcesFitArgs{ScoringStrategy: strategy}
		return noderesources.NewFit(ctx, args, h, plfeature.Features{})
	}
}

func inTreeStrategy(name string, kind schedconfig.ScoringStrategyType, shape []schedconfig.UtilizationShapePoint) packingStrategy {
	var resources []schedconfig.ResourceSpec
	for _, w := range packingWeights {
		resources = append(resources, schedconfig.ResourceSpec{Name: string(w.Name), Weight: w.Weight})
	}
	strategy := &schedconfig.ScoringStrategy{Type: kind, Resources: resources}
	if shape != nil {
		strategy.RequestedToCapacityRatio = &schedconfig.RequestedToCapacityRatioParam{Shape: shape}
	}
	return packingStrategy{name: name, plugins: func() []tf.RegisterPluginFunc {
		return []tf.RegisterPluginFunc{
			tf.RegisterPluginAsExtensions(noderesources.Name, fitFactory(strategy), "PreFilter", "Filter", "PreScore", "Score"),
		}
	}}
}

const (
	strategyBinpack        = "flotilla Binpack"
	strategyLeastAllocated = "NodeResourcesFit LeastAllocated (default)"
	strategyMostAllocated  = "NodeResourcesFit MostAllocated"
	strategyUnprotected    = "flotilla Binpack, scarceResources: []"
)

func binpackStrategy(name string, scarce []corev1.ResourceName) packingStrategy {
	binpackArgs := &config.BinpackArgs{Resources: packingWeights, ScarceResources: scarce}
	leastAllocated := &schedconfig.ScoringStrategy{Type: schedconfig.LeastAllocated, Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}}
	return packingStrategy{name: name, plugins: func() []tf.RegisterPluginFunc {
		return []tf.RegisterPluginFunc{
			// Fit filters only, as in the shipped profile.
			tf.RegisterPluginAsExtensions(noderesources.Name, fitFactory(leastAllocated), "PreFilter", "Filter"),
			tf.RegisterPluginAsExtensionsWithWeight(Name, 1, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
				return New(ctx, binpackArgs, h)
			}, "PreScore", "Score"),
		}
	}}
}

// packingStrategies: flotilla Binpack as shipped first, the in-tree
// strategies, then Binpack with its scarce-resource protection turned off.
func packingStrategies() []packingStrategy {
	return []packingStrategy{
		binpackStrategy(strategyBinpack, []corev1.ResourceName{gpu}),
		inTreeStrategy(strategyLeastAllocated, schedconfig.LeastAllocated, nil),
		inTreeStrategy(strategyMostAllocated, schedconfig.MostAllocated, nil),
		inTreeStrategy("NodeResourcesFit RequestedToCapacityRatio", schedconfig.RequestedToCapacityRatio,
			[]schedconfig.UtilizationShapePoint{{Utilization: 0, Score: 0}, {Utilization: 100, Score: 10}}),
		binpackStrategy(strategyUnprotected, nil),
	}
}

// mixedCluster: 16 CPU-only nodes and gpuNodes 8-GPU nodes.
func mixedCluster(gpuNodes int) []*corev1.Node {
	var nodes []*corev1.Node
	for i := 0; i < 16; i++ {
		nodes = append(nodes, st.MakeNode().Name(fmt.Sprintf("cpu-%02d", i)).Capacity(map[corev1.ResourceName]string{
			corev1.ResourceCPU: "32", corev1.ResourceMemory: "128Gi", corev1.ResourcePods: "110"}).Obj())
	}
	for i := 0; i < gpuNodes; i++ {
		nodes = append(nodes, st.MakeNode().Name(fmt.Sprintf("gpu-%02d", i)).Capacity(map[corev1.ResourceName]string{
			corev1.ResourceCPU: "64", corev1.ResourceMemory: "512Gi", corev1.ResourcePods: "110", gpu: "8"}).Obj())
	}
	return nodes
}

// mixedWorkload: CPU-only pods of four sizes filling ~95% of the CPU-only
// nodes, and 1/2/4/8-GPU pods asking for ~90% of the GPUs, in a seeded
// random arrival order.
func mixedWorkload(seed uint64, cpuDemand, gpuDemand int) []*corev1.Pod {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var pods []*corev1.Pod
	add := func(name string, req map[corev1.ResourceName]string) {
		p := st.MakePod().Name(name).Namespace("bench").UID(name).Req(req).Obj()
		pods = append(pods, p)
	}
	cpuSizes := []int{1, 2, 4, 8}
	for cpu, i := 0, 0; cpu < cpuDemand; i++ {
		c := cpuSizes[rng.IntN(len(cpuSizes))]
		cpu += c
		add(fmt.Sprintf("cpu-pod-%03d", i), map[corev1.ResourceName]string{
			corev1.ResourceCPU: fmt.Sprint(c), corev1.ResourceMemory: fmt.Sprintf("%dGi", 4*c)})
	}
	gpuSizes := []int{1, 1, 2, 4, 8}
	for gpus, i := 0, 0; gpus < gpuDemand; i++ {
		g := gpuSizes[rng.IntN(len(gpuSizes))]
		if gpus+g > gpuDemand {
			g = gpuDemand - gpus
		}
		gpus += g
		add(fmt.Sprintf("gpu-pod-%03d", i), map[corev1.ResourceName]string{
			corev1.ResourceCPU: fmt.Sprint(6 * g), corev1.ResourceMemory: fmt.Sprintf("%dGi", 48*g), gpu: fmt.Sprint(g)})
	}
	rng.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	return pods
}

type packingResult struct {
	strategy                 string
	nodesUsed                int
	unplacedCPU, unplacedGPU int
	gpusAllocated, gpusTotal int64
	cpuPodsOnGPUNodes        int
}

func requestOf(p *corev1.Pod, name corev1.ResourceName) int64 {
	var total int64
	for _, c := range p.Spec.Containers {
		q := c.Resources.Requests[name]
		if name == corev1.ResourceCPU {
			total += q.MilliValue()
		} else {
			total += q.Value()
		}
	}
	return total
}

func place(t testing.TB, s packingStrategy, nodes []*corev1.Node, pods []*corev1.Pod) packingResult {
	ctx := context.Background()
	// The framework records plugin metrics; registering them is idempotent.
	schedmetrics.Register()
	snapshot := internalcache.NewSnapshot(nil, nodes)
	registrations := append([]tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, s.plugins()...)
	fw, err := tf.NewFramework(ctx, registrations, "packing", frameworkruntime.WithSnapshotSharedLister(snapshot))
	require.NoError(t, err)
	nodeInfos, err := snapshot.NodeInfos().List()
	require.NoError(t, err)
	sort.Slice(nodeInfos, func(i, j int) bool { return nodeInfos[i].Node().Name < nodeInfos[j].Node().Name })

	res := packingResult{strategy: s.name}
	for _, pod := range pods {
		isGPU := requestOf(pod, gpu) > 0
		state := framework.NewCycleState()
		var feasible []fwk.NodeInfo
		if _, status, _ := fw.RunPreFilterPlugins(ctx, state, pod); status.IsSuccess() {
			for _, ni := range nodeInfos {
				if fw.RunFilterPlugins(ctx, state, pod, ni).IsSuccess() {
					feasible = append(feasible, ni)
				}
			}
		}
		if len(feasible) == 0 {
			if isGPU {
				res.unplacedGPU++
			} else {
				res.unplacedCPU++
			}
			continue
		}
		require.True(t, fw.RunPreScorePlugins(ctx, state, pod, feasible).IsSuccess())
		scores, status := fw.RunScorePlugins(ctx, state, pod, feasible)
		require.True(t, status.IsSuccess(), status.Message())
		best := 0
		for i := range scores {
			if scores[i].TotalScore > scores[best].TotalScore {
				best = i
			}
		}
		chosen := feasible[best].(*framework.NodeInfo)
		pod = pod.DeepCopy()
		pod.Spec.NodeName = chosen.Node().Name
		pod.UID = types.UID(pod.Name)
		chosen.AddPod(pod)
		if !isGPU && chosen.Allocatable.ScalarResources[gpu] > 0 {
			res.cpuPodsOnGPUNodes++
		}
	}
	for _, ni := range nodeInfos {
		if len(ni.GetPods()) > 0 {
			res.nodesUsed++
		}
		res.gpusTotal += ni.GetAllocatable().GetScalarResources()[gpu]
		res.gpusAllocated += ni.GetRequested().GetScalarResources()[gpu]
	}
	return res
}

// packingLowerBound: for each resource, the fewest nodes whose combined
// capacity holds the total request (taking the largest nodes first); the
// workload needs at least the largest of these.
func packingLowerBound(nodes []*corev1.Node, pods []*corev1.Pod) int {
	bound := 0
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, gpu} {
		var need int64
		for _, p := range pods {
			need += requestOf(p, r)
		}
		var capacities []int64
		for _, n := range nodes {
			q := n.Status.Allocatable[r]
			if r == corev1.ResourceCPU {
				capacities = append(capacities, q.MilliValue())
			} else {
				capacities = append(capacities, q.Value())
			}
		}
		sort.Slice(capacities, func(i, j int) bool { return capacities[i] > capacities[j] })
		k := 0
		for have := int64(0); have < need && k < len(capacities); k++ {
			have += capacities[k]
		}
		bound = max(bound, k)
	}
	return bound
}

// packingSeeds are the arrival orders and pod mixes compared; one seed can
// flatter any strategy, six rarely do.
var packingSeeds = []uint64{1, 2, 3, 4, 5, 6}

// The workload: ~300 cpu of CPU-only pods (60% of the CPU-only nodes) and 58
// GPUs of GPU pods (90% of the GPUs).
const packingCPUDemand, packingGPUDemand = 300, 58

func (r *packingResult) add(o packingResult) {
	r.nodesUsed += o.nodesUsed
	r.unplacedCPU += o.unplacedCPU
	r.unplacedGPU += o.unplacedGPU
	r.gpusAllocated += o.gpusAllocated
	r.gpusTotal += o.gpusTotal
	r.cpuPodsOnGPUNodes += o.cpuPodsOnGPUNodes
}

func packingTable(results []packingResult, bound int, gpuShare float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| strategy | nodes used | unplaced GPU pods | unplaced CPU pods | GPU allocation | CPU pods on GPU nodes |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f%% | %d |\n", r.strategy, r.nodesUsed, r.unplacedGPU, r.unplacedCPU,
			100*float64(r.gpusAllocated)/float64(r.gpusTotal), r.cpuPodsOnGPUNodes)
	}
	fmt.Fprintf(&b, "| bin-packing lower bound (all pods placed) | %d | 0 | 0 | %.1f%% | |\n", bound, 100*gpuShare)
	return b.String()
}

// packAll places every seeded workload on the cluster with every strategy
// and returns the totals, in packingStrategies' order, and the summed lower
// bound.
func packAll(t *testing.T, gpuNodes int) ([]packingResult, int) {
	nodes := mixedCluster(gpuNodes)
	strategies := packingStrategies()
	totals := make([]packingResult, len(strategies))
	bound := 0
	for _, seed := range packingSeeds {
		pods := mixedWorkload(seed, packingCPUDemand, packingGPUDemand)
		bound += packingLowerBound(nodes, pods)
		for i, s := range strategies {
			r := place(t, s, nodes, pods)
			totals[i].strategy = s.name
			totals[i].add(r)
			if s.name == strategyBinpack {
				assert.Zero(t, r.unplacedGPU+r.unplacedCPU, "%d GPU nodes, seed %d: binpack left pods unplaced", gpuNodes, seed)
			}
		}
	}
	return totals, bound
}

func byName(results []packingResult, name string) packingResult {
	for _, r := range results {
		if r.strategy == name {
			return r
		}
	}
	panic("no strategy " + name)
}

// Totals over six seeded workloads on 16 CPU-only nodes (32 cpu, 128Gi) and
// 8-GPU nodes (64 cpu, 512Gi): 8 of them, where the GPU pods ask for 90.6%
// of the GPUs (tight), and 16 (roomy, 45%). On the tight cluster Binpack must
// never strand a GPU pod, strand fewer than every in-tree strategy, and use
// fewer nodes than the default (LeastAllocated). Its scarce-resource
// protection is what costs nodes: without it, Binpack ranks nodes exactly as
// MostAllocated with the same weights, on both clusters.
func TestPackingQualityAgainstInTreeStrategies(t *testing.T) {
	tight, tightBound := packAll(t, 8)
	roomy, roomyBound := packAll(t, 16)
	tables := "Tight: 8 GPU nodes (the GPU pods ask for 90.6% of the GPUs)\n\n" + packingTable(tight, tightBound, float64(packingGPUDemand)/64) +
		"\nRoomy: 16 GPU nodes (45.3%)\n\n" + packingTable(roomy, roomyBound, float64(packingGPUDemand)/128)
	t.Log("\n" + tables)
	if *packingReport != "" {
		require.NoError(t, report.ReplaceSection(*packingReport, "packing-quality", tables))
	}
	ours := byName(tight, strategyBinpack)
	for _, other := range tight {
		if other.strategy == strategyBinpack || other.strategy == strategyUnprotected {
			continue
		}
		assert.Less(t, ours.unplacedGPU, other.unplacedGPU, "unplaced GPU pods vs %s", other.strategy)
		assert.Greater(t, ours.gpusAllocated, other.gpusAllocated, "GPUs allocated vs %s", other.strategy)
	}
	assert.Less(t, ours.nodesUsed, byName(tight, strategyLeastAllocated).nodesUsed, "nodes used vs the default")
	assert.LessOrEqual(t, ours.nodesUsed, tightBound+2*len(packingSeeds), "within two nodes a workload of the lower bound")
	for _, results := range [][]packingResult{tight, roomy} {
		unprotected, most := byName(results, strategyUnprotected), byName(results, strategyMostAllocated)
		unprotected.strategy = most.strategy
		assert.Equal(t, most, unprotected, "Binpack without protection vs MostAllocated")
	}
}

func BenchmarkPackingQuality(b *testing.B) {
	nodes, pods := mixedCluster(8), mixedWorkload(1, packingCPUDemand, packingGPUDemand)
	for _, s := range packingStrategies() {
		b.Run(strings.ReplaceAll(s.name, " ", "_"), func(b *testing.B) {
			var r packingResult
			for i := 0; i < b.N; i++ {
				r = place(b, s, nodes, pods)
			}
			b.ReportMetric(float64(r.nodesUsed), "nodes")
			b.ReportMetric(float64(r.unplacedGPU), "unplaced-gpu-pods")
			b.ReportMetric(100*float64(r.gpusAllocated)/float64(r.gpusTotal), "gpu-alloc-%")
		})
	}
}
