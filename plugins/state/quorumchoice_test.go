package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// A gang's quorum may be completed by members of several roles: the choices
// try the smallest first and, when some roles require a domain of their
// own, the members of the other roles first (a Ray gang's fifth member is
// a CPU worker when its GPU workers' clique holds only their minimum).
func TestQuorumChoiceChoices(t *testing.T) {
	pod := func(name, role string, cpu string) *corev1.Pod {
		return st.MakePod().Namespace("ns").Name(name).UID(name).Labels(map[string]string{"role": role}).
			Req(map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: "4Gi"}).Obj()
	}
	head := pod("head", "head", "2")
	gpu := []*corev1.Pod{pod("gpu-0", "gpu", "1"), pod("gpu-1", "gpu", "1"), pod("gpu-2", "gpu", "1"), pod("gpu-3", "gpu", "1")}
	cpuWorkers := []*corev1.Pod{pod("cpu-0", "cpu", "2"), pod("cpu-1", "cpu", "2")}
	inClique := func(p *corev1.Pod) bool { return p.Labels["role"] == "gpu" }
	names := func(sets [][]*corev1.Pod) [][]string {
		var out [][]string
		for _, set := range sets {
			var n []string
			for _, p := range set {
				n = append(n, p.Name)
			}
			out = append(out, n)
		}
		return out
	}
	tests := []struct {
		name     string
		choice   QuorumChoice
		confined func(*corev1.Pod) bool
		want     [][]string
	}{
		{name: "the smallest, then the roles without a domain",
			choice:   QuorumChoice{Required: []*corev1.Pod{head, gpu[0], gpu[1], gpu[2]}, Candidates: []*corev1.Pod{gpu[3], cpuWorkers[0], cpuWorkers[1]}, Extra: 1},
			confined: inClique,
			want:     [][]string{{"head", "gpu-0", "gpu-1", "gpu-2", "gpu-3"}, {"head", "gpu-0", "gpu-1", "gpu-2", "cpu-0"}}},
		{name: "the smallest are of roles without a domain already: one choice",
			choice:   QuorumChoice{Required: []*corev1.Pod{head}, Candidates: []*corev1.Pod{cpuWorkers[0], gpu[3], cpuWorkers[1]}, Extra: 1},
			confined: inClique,
			want:     [][]string{{"head", "cpu-0"}}},
		{name: "no role requires a domain: one choice",
			choice: QuorumChoice{Required: []*corev1.Pod{head}, Candidates: []*corev1.Pod{gpu[3], cpuWorkers[0]}, Extra: 1},
			want:   [][]string{{"head", "gpu-3"}}},
		{name: "every candidate is needed: one choice",
			choice:   QuorumChoice{Required: []*corev1.Pod{head}, Candidates: []*corev1.Pod{gpu[3], cpuWorkers[0]}, Extra: 2},
			confined: inClique,
			want:     [][]string{{"head", "gpu-3", "cpu-0"}}},
		{name: "more extras than roles without a domain offer: theirs first, then the smallest of the others",
			choice:   QuorumChoice{Required: []*corev1.Pod{head}, Candidates: []*corev1.Pod{gpu[2], gpu[3], cpuWorkers[0], cpuWorkers[1]}, Extra: 3},
			confined: inClique,
			want:     [][]string{{"head", "gpu-2", "gpu-3", "cpu-0"}, {"head", "cpu-0", "cpu-1", "gpu-2"}}},
		{name: "nothing beyond the required",
			choice:   QuorumChoice{Required: []*corev1.Pod{head, gpu[0]}},
			confined: inClique,
			want:     [][]string{{"head", "gpu-0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, names(tt.choice.Choices(tt.confined)))
		})
	}
}
