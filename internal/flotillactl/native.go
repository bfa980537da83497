package flotillactl

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

// nativeGroupName is the native PodGroup (scheduling.k8s.io) a pod names
// in spec.schedulingGroup, if any: that group schedules it, whatever its
// scheduler-plugins label says (as the scheduler's Gang plugin does).
func nativeGroupName(pod *corev1.Pod) (string, bool) {
	if g := pod.Spec.SchedulingGroup; g != nil && g.PodGroupName != nil && *g.PodGroupName != "" {
		return *g.PodGroupName, true
	}
	return "", false
}

// nativeAPIGroup is the API group of Kubernetes' own PodGroup.
const nativeAPIGroup = schedulingv1beta1.GroupName

// nativeName is how a native group is printed: apart from a
// scheduler-plugins PodGroup of the same name.
func nativeName(namespace, name string) string {
	return namespace + "/" + name + " (" + nativeAPIGroup + ")"
}

// nativeGroup is what is read of a native PodGroup: the group (nil when
// it does not exist or the cluster does not serve the API) and the labels
// its queue is read from — its own, with its Workload's queue label where
// it has none.
type nativeGroup struct {
	pg     *schedulingv1beta1.PodGroup
	labels map[string]string
}

// minCount is the group's gang quorum; 0 for a basic group.
func (g *nativeGroup) minCount() int32 {
	if g.pg == nil || g.pg.Spec.SchedulingPolicy.Gang == nil {
		return 0
	}
	return g.pg.Spec.SchedulingPolicy.Gang.MinCount
}

func nativeGroupOf(ctx context.Context, c *clients, cache map[string]*nativeGroup, namespace, name string) (*nativeGroup, error) {
	key := namespace + "/" + name
	if g, ok := cache[key]; ok {
		return g, nil
	}
	g := &nativeGroup{}
	pg, err := c.kube.SchedulingV1beta1().PodGroups(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// Missing, or the API is not served: the pod waits for it.
	case err != nil:
		return nil, err
	default:
		g.pg, g.labels = pg, pg.Labels
		if _, ok := pg.Labels[flotillav1alpha1.QueueLabel]; !ok && pg.Spec.WorkloadRef != nil {
			if w, err := c.kube.SchedulingV1beta1().Workloads(namespace).Get(ctx, pg.Spec.WorkloadRef.WorkloadName, metav1.GetOptions{}); err == nil {
				if q, ok := w.Labels[flotillav1alpha1.QueueLabel]; ok {
					g.labels = map[string]string{flotillav1alpha1.QueueLabel: q}
				}
			}
		}
	}
	cache[key] = g
	return g, nil
}

// nativeWaitingMessage is why a native group's member waits: its
// PodScheduled message when that gives a reason from flotilla's set; else
// what flotilla last told the PodGroup (kube-scheduler's cycle stops
// trying members once too few are left for minCount, so most members
// carry its words, the group flotilla's); else the member's message.
func nativeWaitingMessage(ctx context.Context, c *clients, pod *corev1.Pod, g *nativeGroup, name string) string {
	if g.pg == nil {
		return reasons.WaitingForPodGroup.Say("PodGroup %s does not exist", nativeName(pod.Namespace, name))
	}
	var own string
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
			own = cond.Message
		}
	}
	if len(reasons.In(own)) > 0 {
		return own
	}
	events, err := c.kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=PodGroup,involvedObject.name=" + name})
	if err == nil {
		if told := lastReasonOf(events.Items, name); told != "" {
			return told
		}
	}
	if own != "" {
		return own
	}
	return "not tried yet"
}

// lastReasonOf is the newest of the native PodGroup name's events that gives a
// reason from the set (a scheduler-plugins PodGroup of the same name has
// events of its own kind too).
func lastReasonOf(events []corev1.Event, name string) string {
	sort.SliceStable(events, func(i, j int) bool { return eventTime(events[i]).After(eventTime(events[j])) })
	for _, e := range events {
		if e.InvolvedObject.Name != name || !strings.HasPrefix(e.InvolvedObject.APIVersion, nativeAPIGroup+"/") {
			continue
		}
		if len(reasons.In(e.Message)) > 0 {
			return e.Message
		}
	}
	return ""
}

// nativeMembers are the namespace's pods that name the native group.
func nativeMembers(ctx context.Context, c *clients, name string) ([]corev1.Pod, error) {
	list, err := listPods(ctx, c.kube.CoreV1().Pods(c.namespace), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, pod := range list.Items {
		if g, ok := nativeGroupName(&pod); ok && g == name {
			out = append(out, pod)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("PodGroup %s has no pods", nativeName(c.namespace, name))
	}
	return out, nil
}

// explainNative is why's explanation of a native group: every member, its
// queue, its minCount, and why it waits (nativeWaitingMessage).
func explainNative(ctx context.Context, c *clients, name string, nsLabels map[string]string, defaultQueue string, events []corev1.Event) (Explanation, error) {
	e := Explanation{Kind: "gang", Name: nativeName(c.namespace, name), Placed: map[string]string{}}
	g, err := nativeGroupOf(ctx, c, map[string]*nativeGroup{}, c.namespace, name)
	if err != nil {
		return e, err
	}
	members, err := nativeMembers(ctx, c, name)
	if err != nil {
		return e, err
	}
	e.MinMember, e.Phase = g.minCount(), string(members[0].Status.Phase)
	e.Queue = flotillav1alpha1.QueueOf(members[0].Labels, g.labels, nsLabels, defaultQueue)
	e.addMembers(members, map[string]bool{"PodGroup/" + name: true}, events, func(m *corev1.Pod) string {
		return nativeWaitingMessage(ctx, c, m, g, name)
	})
	if e.Waiting {
		if e.Held = heldRoomOf(events, name); e.Held != nil {
			own := func(p *corev1.Pod) bool { group, ok := nativeGroupName(p); return ok && group == name }
			if err := e.Held.runningOn(ctx, c, own); err != nil {
				return e, err
			}
		}
	}
	return e, nil
}
