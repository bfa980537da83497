package binpack

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/apis/config"
	"github.com/flotilla-sched/flotilla/apis/config/validation"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// Name is the plugin's name in a KubeSchedulerConfiguration; its args are
// kind BinpackArgs.
const Name = "Binpack"

const preScoreStateKey fwk.StateKey = Name + "/request"

// Binpack scores nodes by how full they would be after placing the pod.
type Binpack struct {
	resources []config.ResourceWeight
	scarce    []corev1.ResourceName
}

var (
	_ fwk.PreScorePlugin  = &Binpack{}
	_ fwk.ScorePlugin     = &Binpack{}
	_ fwk.ScoreExtensions = &Binpack{}
	_ fwk.SignPlugin      = &Binpack{}
)

// New builds the plugin from validated args.
func New(_ context.Context, obj runtime.Object, _ fwk.Handle) (fwk.Plugin, error) {
	args, err := validation.Args(Name, obj, validation.ValidateBinpackArgs)
	if err != nil {
		return nil, err
	}
	return &Binpack{resources: args.Resources, scarce: args.ScarceResources}, nil
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
}

func (p *podScoreInput) Clone() fwk.StateData { return p }

// PreScore turns the pod's requests into the weighted terms Score uses.
func (b *Binpack) PreScore(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	state.Write(preScoreStateKey, b.scoreInput(pod))
	return nil
}

func (b *Binpack) scoreInput(pod *corev1.Pod) *podScoreInput {
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	in := &podScoreInput{}
	for _, r := range b.resources {
		if r.Weight <= 0 {
			continue
		}
		q, ok := requests[r.Name]
		if !ok || q.IsZero() {
			continue
		}
		amount := q.Value()
		if r.Name == corev1.ResourceCPU {
			amount = q.MilliValue()
		}
		in.terms = append(in.terms, weightedRequest{name: r.Name, weight: r.Weight, request: amount})
		in.weightSum += r.Weight
	}
	for _, s := range b.scarce {
		if q, ok := requests[s]; !ok || q.IsZero() {
			in.unrequested = append(in.unrequested, s)
		}
	}
	return in
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
		// missing state must not fail scheduling.
		return b.scoreInput(pod), nil
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
	used, alloc := nodeInfo.GetRequested(), nodeInfo.GetAllocatable()
	var weighted float64
	weightSum := in.weightSum
	for _, t := range in.terms {
		total := capacity.Amount(alloc, t.name)
		if total <= 0 {
			// Not in the node's allocatable although the node passed the
			// filters: a DRA-backed extended resource (its devices are in
			// ResourceSlices, not allocatable). How full they are is not
			// seen here, so the node is scored on the pod's other
			// resources (see doc.go).
			weightSum -= t.weight
			continue
		}
		after := capacity.Amount(used, t.name) + t.request
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
	used, alloc := nodeInfo.GetRequested(), nodeInfo.GetAllocatable()
	for _, scarce := range in.unrequested {
		total := capacity.Amount(alloc, scarce)
		free := total - capacity.Amount(used, scarce)
		if total <= 0 || free <= 0 {
			continue
		}
		for _, t := range in.terms {
			allocatable := capacity.Amount(alloc, t.name)
			left := allocatable - capacity.Amount(used, t.name) - t.request
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
