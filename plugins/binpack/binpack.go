package binpack

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/apis/config"
	"github.com/flotilla-sched/flotilla/apis/config/validation"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
	"github.com/flotilla-sched/flotilla/plugins/state/devices"
	"github.com/flotilla-sched/flotilla/plugins/state/dra"
)

// Name is the plugin's name in a KubeSchedulerConfiguration; its args are
// kind BinpackArgs.
const Name = "Binpack"

const preScoreStateKey fwk.StateKey = Name + "/request"

// Binpack scores nodes by how full they would be after placing the pod.
type Binpack struct {
	resources []config.ResourceWeight
	scarce    []corev1.ResourceName
	// deviceClasses scores every DeviceClass's devices that resources and
	// scarce leave out.
	deviceClasses config.DeviceClassScoring
	// devices reads DRA devices (nil without a handle: none are counted).
	devices *dra.Reader
}

var (
	_ fwk.PreScorePlugin  = &Binpack{}
	_ fwk.ScorePlugin     = &Binpack{}
	_ fwk.ScoreExtensions = &Binpack{}
	_ fwk.SignPlugin      = &Binpack{}
)

// New builds the plugin from validated args.
func New(_ context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := validation.Args(Name, obj, validation.ValidateBinpackArgs)
	if err != nil {
		return nil, err
	}
	b := &Binpack{resources: args.Resources, scarce: args.ScarceResources, deviceClasses: args.DeviceClasses}
	if h != nil {
		b.devices = state.NewDeviceReader(h)
	}
	return b, nil
}

// Name returns the plugin's name.
func (b *Binpack) Name() string { return Name }

// weightedRequest is one term of the score: a resource the pod asks for and
// its weight.
type weightedRequest struct {
	name    corev1.ResourceName
	weight  int64
	request int64
}

// podScoreInput is computed once per pod so that Score does no map building
// or request arithmetic per node.
type podScoreInput struct {
	terms       []weightedRequest
	weightSum   int64
	unrequested []corev1.ResourceName // scarce resources the pod does not ask for
	// devices are, per node, its DRA devices of the classes counted under
	// the names of terms and unrequested (see package state/devices):
	// counted in PreScore, read by Score from many goroutines.
	devices map[string]devices.Counts
}

func (p *podScoreInput) Clone() fwk.StateData { return p }

// PreScore turns the pod's requests into the weighted terms Score uses.
func (b *Binpack) PreScore(ctx context.Context, cycle fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	catalog := b.catalogFor(ctx, pod)
	in, err := b.scoreInput(pod, catalog)
	if err != nil {
		return fwk.AsStatus(err)
	}
	if err := in.countDevices(catalog, nodes); err != nil {
		return fwk.AsStatus(err)
	}
	cycle.Write(preScoreStateKey, in)
	return nil
}

// catalogFor reads the devices scoring the pods may count (nil without a
// DRA reader): those they ask for, the weighted and scarce resources that
// are device keys and, when every class is scarce, every class's.
func (b *Binpack) catalogFor(ctx context.Context, pods ...*corev1.Pod) *devices.Catalog {
	if b.devices == nil {
		return nil
	}
	counted := slices.Clone(b.scarce)
	for _, r := range b.resources {
		counted = append(counted, r.Name)
	}
	if b.deviceClasses.Scarce {
		counted = append(counted, b.devices.ClassKeys()...)
	}
	return b.devices.View(ctx, pods, counted...).Catalog()
}

// scoreInput turns the pod's requests, and the devices its claims take
// (with a catalog), into the score's terms.
func (b *Binpack) scoreInput(pod *corev1.Pod, catalog *devices.Catalog) (*podScoreInput, error) {
	requests := b.devices.Requests(pod)
	if catalog != nil {
		demand, err := catalog.Demand(pod)
		if err != nil {
			return nil, err
		}
		requests.Add(demand)
	}
	in := &podScoreInput{}
	listed := make(map[corev1.ResourceName]bool, len(b.resources))
	for _, r := range b.resources {
		listed[r.Name] = true
		if r.Weight <= 0 || requests[r.Name] <= 0 {
			continue
		}
		in.terms = append(in.terms, weightedRequest{name: r.Name, weight: r.Weight, request: requests[r.Name]})
		in.weightSum += r.Weight
	}
	scarce := b.scarce
	if catalog != nil {
		classKeys := catalog.View().ClassKeys()
		for _, key := range classKeys {
			if w := b.deviceClasses.Weight; w > 0 && !listed[key] && requests[key] > 0 {
				in.terms = append(in.terms, weightedRequest{name: key, weight: w, request: requests[key]})
				in.weightSum += w
			}
		}
		if b.deviceClasses.Scarce {
			scarce = append(slices.Clone(scarce), classKeys...)
			slices.Sort(scarce)
			scarce = slices.Compact(scarce)
		}
	}
	for _, s := range scarce {
		if requests[s] <= 0 {
			in.unrequested = append(in.unrequested, s)
		}
	}
	return in, nil
}

// countDevices counts, on every node, the devices of the classes counted
// under the input's names, if any name is a class's.
func (in *podScoreInput) countDevices(catalog *devices.Catalog, nodes []fwk.NodeInfo) error {
	if catalog == nil {
		return nil
	}
	var names []capacity.Resources
	for _, t := range in.terms {
		names = append(names, capacity.Resources{t.name: 1})
	}
	for _, s := range in.unrequested {
		names = append(names, capacity.Resources{s: 1})
	}
	keys := catalog.View().Keys(names...)
	if len(keys) == 0 {
		return nil
	}
	in.devices = make(map[string]devices.Counts, len(nodes))
	for _, n := range nodes {
		counts, err := catalog.CountOn(n.Node(), keys)
		if err != nil {
			return err
		}
		in.devices[n.Node().Name] = counts
	}
	return nil
}

// amounts are a node's total and used amount of a resource: from its
// allocatable and requested, or, for a resource it has none of in
// allocatable, from its DRA devices of the class counted under that name.
func (in *podScoreInput) amounts(nodeInfo fwk.NodeInfo, name corev1.ResourceName) (total, used int64) {
	total = capacity.Amount(nodeInfo.GetAllocatable(), name)
	if total > 0 || in.devices == nil {
		return total, capacity.Amount(nodeInfo.GetRequested(), name)
	}
	counts := in.devices[nodeInfo.Node().Name]
	return counts.Total[name], counts.Total[name] - counts.Free[name]
}

// Score returns the packing score in [0, MaxNodeScore], negated minus one
// when the pod would intrude on what the node keeps for its free scarce
// resources, so that NormalizeScore can tell the two kinds of node apart.
func (b *Binpack) Score(_ context.Context, state fwk.CycleState, pod *corev1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	in, err := b.readInput(state, pod)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	score := packingScore(in, nodeInfo)
	if intrudes(in, nodeInfo) {
		return -score - 1, nil
	}
	return score, nil
}

func (b *Binpack) readInput(state fwk.CycleState, pod *corev1.Pod) (*podScoreInput, error) {
	data, err := state.Read(preScoreStateKey)
	if err != nil {
		// PreScore is skipped by nothing in the framework today, but a
		// missing state must not fail scheduling: score without devices.
		return b.scoreInput(pod, nil)
	}
	in, ok := data.(*podScoreInput)
	if !ok {
		return nil, fmt.Errorf("%s: unexpected state %T", Name, data)
	}
	return in, nil
}

func packingScore(in *podScoreInput, nodeInfo fwk.NodeInfo) int64 {
	if in.weightSum == 0 {
		return 0
	}
	var weighted float64
	weightSum := in.weightSum
	for _, t := range in.terms {
		total, used := in.amounts(nodeInfo, t.name)
		if total <= 0 {
			// Neither in the node's allocatable nor counted as devices
			// although the node passed the filters: the node is scored on
			// the pod's other resources (see doc.go).
			weightSum -= t.weight
			continue
		}
		after := used + t.request
		if after > total {
			return 0
		}
		weighted += float64(t.weight) * float64(after) / float64(total)
	}
	if weightSum <= 0 {
		return 0
	}
	return int64(float64(fwk.MaxNodeScore) * weighted / float64(weightSum))
}

// intrudes reports whether placing the pod would leave the node less of some
// resource the pod requests than the node's free units of an unrequested
// scarce resource proportionally need (see doc.go).
func intrudes(in *podScoreInput, nodeInfo fwk.NodeInfo) bool {
	for _, scarce := range in.unrequested {
		total, used := in.amounts(nodeInfo, scarce)
		free := total - used
		if total <= 0 || free <= 0 {
			continue
		}
		for _, t := range in.terms {
			allocatable, usedOfT := in.amounts(nodeInfo, t.name)
			left := allocatable - usedOfT - t.request
			// left < free/total * allocatable, without float rounding.
			if float64(left)*float64(total) < float64(free)*float64(allocatable) {
				return true
			}
		}
	}
	return false
}

// ScoreExtensions exposes NormalizeScore.
func (b *Binpack) ScoreExtensions() fwk.ScoreExtensions { return b }

// NormalizeScore applies the scarce-resource bands described in doc.go.
func (b *Binpack) NormalizeScore(_ context.Context, _ fwk.CycleState, _ *corev1.Pod, scores fwk.NodeScoreList) *fwk.Status {
	var clean, holding bool
	for _, s := range scores {
		if s.Score < 0 {
			holding = true
		} else {
			clean = true
		}
	}
	for i := range scores {
		raw := scores[i].Score
		switch {
		case !holding || !clean:
			if raw < 0 {
				scores[i].Score = -raw - 1
			}
		case raw < 0:
			scores[i].Score = (-raw - 1) / 2
		default:
			scores[i].Score = (fwk.MaxNodeScore+1)/2 + raw/2
		}
	}
	return nil
}

// SignPod keeps opportunistic batching on: pods with equal requests get
// equal scores from this plugin on equal nodes.
func (b *Binpack) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	return []fwk.SignFragment{
		{Key: Name + ".PodRequests", Value: resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})},
	}, nil
}
