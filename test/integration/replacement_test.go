package integration

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/internal/cluster"
)

// A gang made by the real Job controller loses members to failures; the
// Job controller replaces them after its failure back-off (10 s, the
// default), and the replacements must be placed whatever the siblings are
// doing by then: still running, all succeeded, some of each. A gang's
// quorum counts placed and succeeded members, so a replacement never waits
// for a quorum that already ran. Each Job must complete and its PodGroup
// reach Finished.
func TestGangReplacementMembers(t *testing.T) {
	// Four 8-pod gangs of 3-cpu pods run side by side, one pod a node.
	h := startRealisticCluster(t, nodeSpecs("node", 32, cluster.NodeSpec{CPU: "4", Memory: "16Gi"})...)

	for _, tc := range []struct {
		name       string
		runSeconds float64
		// fail members fail (exit code 1) once all run; finishEarly others
		// succeed at the same moment, the rest run on.
		fail, finishEarly int
		// siblingsDoneFirst: the replacements arrive after every sibling
		// has finished (the Job's back-off outlasts their run).
		siblingsDoneFirst bool
	}{
		{name: "siblings still run", runSeconds: 20, fail: 1},
		{name: "siblings all succeeded", runSeconds: 4, fail: 1, siblingsDoneFirst: true},
		{name: "some succeeded, the rest run", runSeconds: 20, fail: 1, finishEarly: 3},
		{name: "two fail at once", runSeconds: 4, fail: 2, siblingsDoneFirst: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", "-"), ",", "")
			_, err := h.Client.CoreV1().Namespaces().Create(h.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			require.NoError(t, err)
			_, err = h.PodGroups.SchedulingV1alpha1().PodGroups(ns).Create(h.Ctx, cluster.PodGroup(ns, "job", 8), metav1.CreateOptions{})
			require.NoError(t, err)
			_, err = h.CreateJob(h.Ctx, cluster.WorkloadSpec{Namespace: ns, Name: "job", Replicas: 8, CPU: "3", Memory: "1Gi", PodGroup: "job", RunSeconds: tc.runSeconds})
			require.NoError(t, err)

			tl := newTimeline(t)
			pods := func() []corev1.Pod {
				list, err := h.Client.CoreV1().Pods(ns).List(h.Ctx, metav1.ListOptions{})
				require.NoError(t, err)
				phases := map[corev1.PodPhase]int{}
				unbound := 0
				for _, p := range list.Items {
					phases[p.Status.Phase]++
					if p.Spec.NodeName == "" {
						unbound++
					}
				}
				tl.add("pods: %d running, %d succeeded, %d failed, %d pending (%d unbound)", phases[corev1.PodRunning], phases[corev1.PodSucceeded], phases[corev1.PodFailed], phases[corev1.PodPending], unbound)
				return list.Items
			}
			var running []corev1.Pod
			require.Eventually(t, func() bool {
				running = running[:0]
				for _, p := range pods() {
					if p.Status.Phase == corev1.PodRunning {
						running = append(running, p)
					}
				}
				return len(running) == 8
			}, 60*time.Second, 250*time.Millisecond, "the gang runs\n%s", tl)
			sort.Slice(running, func(i, j int) bool { return running[i].Name < running[j].Name })
			failed := map[string]bool{}
			for _, p := range running[:tc.fail] {
				require.NoError(t, h.EndPod(h.Ctx, ns, p.Name, 1))
				failed[p.Name] = true
			}
			for _, p := range running[tc.fail : tc.fail+tc.finishEarly] {
				require.NoError(t, h.EndPod(h.Ctx, ns, p.Name, 0))
			}
			tl.add("failed %d members, finished %d early", tc.fail, tc.finishEarly)

			done := make(chan error, 1)
			go func() { done <- h.WaitForJob(h.Ctx, ns, "job", 90*time.Second) }()
		watch:
			for {
				select {
				case err := <-done:
					require.NoError(t, err, "the Job completes\n%s", tl)
					break watch
				case <-time.After(500 * time.Millisecond):
					pods()
				}
			}

			// Every replacement was bound; none of the originals but the
			// failed ones was replaced.
			all := pods()
			var replacements []corev1.Pod
			var siblingsFinished time.Time
			original := map[string]bool{}
			for _, p := range running {
				original[p.Name] = true
			}
			for _, p := range all {
				if !original[p.Name] {
					replacements = append(replacements, p)
					continue
				}
				if failed[p.Name] {
					continue
				}
				for _, c := range p.Status.ContainerStatuses {
					if c.State.Terminated != nil && c.State.Terminated.FinishedAt.After(siblingsFinished) {
						siblingsFinished = c.State.Terminated.FinishedAt.Time
					}
				}
			}
			require.Len(t, replacements, tc.fail, "one replacement per failed member\n%s", tl)
			for _, r := range replacements {
				require.NotEmpty(t, r.Spec.NodeName, "replacement %s bound", r.Name)
				require.Equal(t, corev1.PodSucceeded, r.Status.Phase, "replacement %s ran to the end", r.Name)
				if tc.siblingsDoneFirst {
					// Both times are to the second: in the same second is
					// as near as they tell.
					require.False(t, r.CreationTimestamp.Time.Before(siblingsFinished), "replacement %s arrived (%s) after every sibling finished (%s): the case under test",
						r.Name, r.CreationTimestamp.Format(time.RFC3339), siblingsFinished.Format(time.RFC3339))
				}
			}
			require.Eventually(t, func() bool {
				pg, err := h.PodGroups.SchedulingV1alpha1().PodGroups(ns).Get(h.Ctx, "job", metav1.GetOptions{})
				return err == nil && pg.Status.Phase == schedv1alpha1.PodGroupFinished
			}, 10*time.Second, 250*time.Millisecond, "the PodGroup reaches Finished\n%s", tl)
		})
	}
}
