package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
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

// StillNeeded is the one answer to "which members must fit for this gang
// to run": the member being scheduled first, then the smallest pending
// ones, as many as the quorum still lacks.
func TestStillNeeded(t *testing.T) {
	tests := []struct {
		name      string
		minMember int32
		pods      []*corev1.Pod
		reserved  []string
		first     string
		want      []string
		wantShort int
	}{
		{name: "smallest first", minMember: 2,
			pods: []*corev1.Pod{groupMember("big", 4000, "", ""), groupMember("small", 1000, "", ""), groupMember("mid", 2000, "", "")},
			want: []string{"small", "mid"}},
		{name: "the member being scheduled is among them whatever its size", minMember: 2,
			pods:  []*corev1.Pod{groupMember("big", 4000, "", ""), groupMember("small", 1000, "", ""), groupMember("mid", 2000, "", "")},
			first: "big", want: []string{"big", "small"}},
		{name: "bound, reserved and succeeded members count toward the quorum", minMember: 4,
			pods: []*corev1.Pod{groupMember("bound", 1000, "n1", corev1.PodRunning), groupMember("done", 1000, "n1", corev1.PodSucceeded),
				groupMember("reserved", 1000, "", ""), groupMember("a", 3000, "", ""), groupMember("b", 2000, "", "")},
			reserved: []string{"reserved"}, want: []string{"b"}},
		{name: "quorum reached: nothing is needed", minMember: 1,
			pods: []*corev1.Pod{groupMember("bound", 1000, "n1", corev1.PodRunning), groupMember("a", 1000, "", "")}},
		{name: "too few pending", minMember: 4,
			pods: []*corev1.Pod{groupMember("a", 1000, "", ""), groupMember("b", 1000, "", "")},
			want: []string{"a", "b"}, wantShort: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g"}, Spec: schedv1alpha1.PodGroupSpec{MinMember: tt.minMember}}
			s := NewStatic([]*schedv1alpha1.PodGroup{pg}, tt.pods)
			byName := map[string]*corev1.Pod{}
			for _, p := range tt.pods {
				byName[p.Name] = p
			}
			var got []*corev1.Pod
			var short int
			s.Lock(func(locked *Locked) {
				g := locked.Gang(GroupKey{Namespace: "ns", Name: "g"})
				for _, name := range tt.reserved {
					locked.ReserveMember(g, byName[name], "n2")
				}
				got, short = locked.StillNeeded(g, pg, byName[tt.first])
			})
			assertNeeded(t, got, short, tt.want, tt.wantShort)
		})
	}
}

// With roles, StillNeeded takes each role's shortfall from its own
// members first, then what the total lacks from any; Quorum counts every
// role; a gang without a role's minimum is not admitted by its total.
func TestStillNeededByRole(t *testing.T) {
	roles := `[{"name": "master", "minMember": 1, "selector": {"matchLabels": {"role": "master"}}},
	           {"name": "workers", "minMember": 3, "selector": {"matchLabels": {"role": "worker"}}}]`
	member := func(name, role string, cpu int64, node string) *corev1.Pod {
		p := groupMember(name, cpu, node, "")
		p.Labels["role"] = role
		return p
	}
	tests := []struct {
		name      string
		minMember int32
		pods      []*corev1.Pod
		first     string
		want      []string
		wantShort int
		reached   bool
	}{
		{name: "the big master is needed, however small the workers", minMember: 4,
			pods: []*corev1.Pod{member("m", "master", 8000, ""), member("w1", "worker", 1000, ""), member("w2", "worker", 1000, ""),
				member("w3", "worker", 1000, ""), member("w4", "worker", 1000, "")},
			want: []string{"w1", "w2", "w3", "m"}},
		{name: "the total beyond the roles' minimums comes from any role, smallest first", minMember: 5,
			pods: []*corev1.Pod{member("m", "master", 8000, ""), member("w1", "worker", 1000, ""), member("w2", "worker", 1000, ""),
				member("w3", "worker", 1000, ""), member("w4", "worker", 2000, ""), member("x", "", 500, "")},
			want: []string{"w1", "w2", "w3", "m", "x"}},
		{name: "no master pending: short by one, though the total is there", minMember: 4,
			pods: []*corev1.Pod{member("w1", "worker", 1000, ""), member("w2", "worker", 1000, ""), member("w3", "worker", 1000, ""),
				member("w4", "worker", 1000, ""), member("w5", "worker", 1000, "")},
			want: []string{"w1", "w2", "w3", "w4"}, wantShort: 1},
		{name: "the master bound: the workers' minimum is what is left", minMember: 4,
			pods: []*corev1.Pod{member("m", "master", 8000, "n1"), member("w1", "worker", 1000, ""), member("w2", "worker", 1000, ""),
				member("w3", "worker", 1000, ""), member("w4", "worker", 1000, "")},
			first: "w4", want: []string{"w4", "w1", "w2"}},
		{name: "six workers bound, no master: not reached", minMember: 4,
			pods: []*corev1.Pod{member("m", "master", 8000, ""), member("w1", "worker", 1000, "n1"), member("w2", "worker", 1000, "n1"),
				member("w3", "worker", 1000, "n1"), member("w4", "worker", 1000, "n1")},
			want: []string{"m"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "g", ResourceVersion: "1",
				Annotations: map[string]string{flotillav1alpha1.RolesAnnotation: roles}}, Spec: schedv1alpha1.PodGroupSpec{MinMember: tt.minMember}}
			s := NewStatic([]*schedv1alpha1.PodGroup{pg}, tt.pods)
			byName := map[string]*corev1.Pod{}
			for _, p := range tt.pods {
				byName[p.Name] = p
			}
			var got []*corev1.Pod
			var short int
			var reached bool
			s.Lock(func(locked *Locked) {
				g := locked.Gang(GroupKey{Namespace: "ns", Name: "g"})
				got, short = locked.StillNeeded(g, pg, byName[tt.first])
				reached = locked.Quorum(g, pg).Reached()
			})
			assertNeeded(t, got, short, tt.want, tt.wantShort)
			assert.Equal(t, tt.reached, reached)
		})
	}
}
