package flotillactl

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

// Explanation is why one gang or plain pod of the object asked about waits,
// or that it does not.
type Explanation struct {
	Kind  string `json:"type"` // gang or pod ("kind" is the printed object's)
	Name  string `json:"name"` // namespace/name
	Queue string `json:"queue"`
	// Phase is the PodGroup's, or the pod's.
	Phase     string `json:"phase"`
	MinMember int32  `json:"minMember,omitempty"`
	// Placed are its bound pods and their nodes; Pending the rest.
	Placed  map[string]string `json:"placed"`
	Pending []string          `json:"pending"`
	// Waiting is false when nothing of it waits to be placed.
	Waiting bool     `json:"waiting"`
	Reasons []string `json:"reasons"`
	Message string   `json:"message,omitempty"`
	// Held is the room its reservation holds while it waits, nil when
	// it holds none.
	Held *HeldRoom `json:"held,omitempty"`
	// Events are the last events of its pods and PodGroup, newest last.
	Events []Event `json:"events"`
}

// Event is one event, as kubectl describe shows it.
type Event struct {
	Time    time.Time `json:"time"`
	Object  string    `json:"object"`
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

// lastEvents is how many events an explanation shows.
const lastEvents = 5

func newWhyCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "why (TYPE NAME | TYPE/NAME)",
		Short: "Why an object's pods wait: the reason, the shortfall, the last events and, for a gang, where its members are",
		Long: `Why an object's pods wait. TYPE is any kind the cluster serves, as kubectl
names it (job, jobset, trainjob, raycluster, leaderworkerset, statefulset,
deployment, podgroup, pod, a short name or kind.group): its pods are those
whose owner references lead to it (a JobSet's through its Jobs), a
PodGroup's those labelled with it.`,
		Example: `  kubectl flotilla why job/train -n ml
  kubectl flotilla why podgroup train -n ml
  kubectl flotilla why jobset/train -n ml -o json`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := typeAndName(args)
			if err != nil {
				return err
			}
			c, err := o.clients()
			if err != nil {
				return err
			}
			if c.namespace == "" {
				return fmt.Errorf("why needs a namespace: -n, not -A")
			}
			pods, err := podsOf(cmd.Context(), c, kind, name)
			if err != nil {
				return err
			}
			explanations, err := explain(cmd.Context(), c, pods, o.defaultQueue)
			if err != nil {
				return err
			}
			items := make([]item, len(explanations))
			for i, e := range explanations {
				items[i] = item{value: e, name: objectName(e.Kind, e.Name)}
			}
			return o.printItems("Explanation", items, false, func(w io.Writer) { printExplanations(w, explanations) })
		},
	}
}

// typeAndName reads `TYPE NAME` or `TYPE/NAME`, as kubectl does.
func typeAndName(args []string) (string, string, error) {
	if len(args) == 2 {
		return args[0], args[1], nil
	}
	kind, name, ok := strings.Cut(args[0], "/")
	if !ok || kind == "" || name == "" {
		return "", "", fmt.Errorf("why takes TYPE NAME or TYPE/NAME, got %q", args[0])
	}
	return kind, name, nil
}

// maxOwnerDepth bounds the walk up a pod's owners: TrainJob, JobSet, Job,
// pod is three steps.
const maxOwnerDepth = 5

// podsOf resolves what was asked about to its pods: a pod itself; a
// PodGroup's by its label; any other kind's by the owner references that
// lead from the pod to it.
func podsOf(ctx context.Context, c *clients, kind, name string) ([]corev1.Pod, error) {
	pods := c.kube.CoreV1().Pods(c.namespace)
	// kubectl's TYPE may name the group: podgroups.scheduling.k8s.io.
	resource, group, _ := strings.Cut(strings.ToLower(kind), ".")
	if group == "" && (resource == "podgroup" || resource == "podgroups") {
		// Both APIs serve a "podgroup" on a cluster with native
		// PodGroups on, and the mapper prefers the built-in one: the
		// scheduler-plugins one of that name, as before, else the
		// native one (podgroups.scheduling.k8s.io names it alone).
		if _, err := c.podGroups.SchedulingV1alpha1().PodGroups(c.namespace).Get(ctx, name, metav1.GetOptions{}); err == nil || !apierrors.IsNotFound(err) {
			group = schedv1alpha1.SchemeGroupVersion.Group
		}
	}
	gvr, err := c.mapper.ResourceFor(schema.GroupVersionResource{Group: group, Resource: resource})
	if err != nil {
		return nil, fmt.Errorf("why explains the pods of an object of a kind the cluster serves, not %q: %v", kind, err)
	}
	gvk, err := c.mapper.KindFor(gvr)
	if err != nil {
		return nil, err
	}
	var selector string
	switch gvk.GroupKind() {
	case schema.GroupKind{Kind: "Pod"}:
		pod, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, notFound(err, "Pod", c.namespace, name)
		}
		return []corev1.Pod{*pod}, nil
	case schema.GroupKind{Group: nativeAPIGroup, Kind: "PodGroup"}:
		// Native: its pods name it in spec.schedulingGroup.
		if _, err := c.kube.SchedulingV1beta1().PodGroups(c.namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return nil, notFound(err, "PodGroup", c.namespace, name)
		}
		return nativeMembers(ctx, c, name)
	case schema.GroupKind{Group: schedv1alpha1.SchemeGroupVersion.Group, Kind: "PodGroup"}:
		if _, err := c.podGroups.SchedulingV1alpha1().PodGroups(c.namespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return nil, notFound(err, "PodGroup", c.namespace, name)
		}
		selector = schedv1alpha1.PodGroupLabel + "=" + name
	}
	if selector != "" {
		list, err := listPods(ctx, pods, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, err
		}
		if len(list.Items) == 0 {
			return nil, fmt.Errorf("%s %s/%s has no pods", gvk.Kind, c.namespace, name)
		}
		return list.Items, nil
	}
	obj, err := c.dynamic.Resource(gvr).Namespace(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, notFound(err, gvk.Kind, c.namespace, name)
	}
	list, err := listPods(ctx, pods, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	owners := ownerWalker{c: c, ctx: ctx, seen: map[types.UID][]metav1.OwnerReference{}}
	var out []corev1.Pod
	for _, pod := range list.Items {
		if owners.leadsTo(pod.OwnerReferences, obj.GetUID(), maxOwnerDepth) {
			out = append(out, pod)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s %s/%s has no pods", gvk.Kind, c.namespace, name)
	}
	return out, nil
}

// ownerWalker follows owner references up, reading each owner once.
type ownerWalker struct {
	c    *clients
	ctx  context.Context
	seen map[types.UID][]metav1.OwnerReference
}

// leadsTo reports whether refs, or their owners' within depth steps,
// name target.
func (w ownerWalker) leadsTo(refs []metav1.OwnerReference, target types.UID, depth int) bool {
	if depth == 0 {
		return false
	}
	for _, ref := range refs {
		if ref.UID == target {
			return true
		}
		if w.leadsTo(w.ownersOf(ref), target, depth-1) {
			return true
		}
	}
	return false
}

// ownersOf is the owner references of the object ref names; none when it
// cannot be read (gone, or a kind this user may not read).
func (w ownerWalker) ownersOf(ref metav1.OwnerReference) []metav1.OwnerReference {
	if refs, ok := w.seen[ref.UID]; ok {
		return refs
	}
	w.seen[ref.UID] = nil
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil
	}
	mapping, err := w.c.mapper.RESTMapping(gv.WithKind(ref.Kind).GroupKind(), gv.Version)
	if err != nil {
		return nil
	}
	obj, err := w.c.dynamic.Resource(mapping.Resource).Namespace(w.c.namespace).Get(w.ctx, ref.Name, metav1.GetOptions{})
	if err != nil || obj.GetUID() != ref.UID {
		return nil
	}
	w.seen[ref.UID] = obj.GetOwnerReferences()
	return w.seen[ref.UID]
}

func notFound(err error, kind, namespace, name string) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s/%s not found", kind, namespace, name)
	}
	return err
}

// explain groups the pods by gang (a plain pod is its own) and explains
// each group.
func explain(ctx context.Context, c *clients, pods []corev1.Pod, defaultQueue string) ([]Explanation, error) {
	var nsLabels map[string]string
	if ns, err := c.kube.CoreV1().Namespaces().Get(ctx, c.namespace, metav1.GetOptions{}); err == nil {
		nsLabels = ns.Labels
	}
	groups := map[string][]corev1.Pod{}
	var order []string
	for _, pod := range pods {
		key := "pod/" + pod.Name
		if g, ok := nativeGroupName(&pod); ok {
			key = "native/" + g
		} else if g := pod.Labels[schedv1alpha1.PodGroupLabel]; g != "" {
			key = "gang/" + g
		}
		if groups[key] == nil {
			order = append(order, key)
		}
		groups[key] = append(groups[key], pod)
	}
	// The namespace's events of pods and of PodGroups, selected by the
	// apiserver (a field selector on the involved object's kind), serve
	// every group: not the Jobs' and ReplicaSets' many more.
	var events []corev1.Event
	for _, kind := range []string{"Pod", "PodGroup"} {
		list, err := c.kube.CoreV1().Events(c.namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=" + kind})
		if err != nil {
			return nil, err
		}
		events = append(events, list.Items...)
	}
	var out []Explanation
	for _, key := range order {
		members := groups[key]
		e := Explanation{Kind: "pod", Name: c.namespace + "/" + members[0].Name, Placed: map[string]string{}}
		var pg *schedv1alpha1.PodGroup
		objects := map[string]bool{}
		if kind, group, _ := strings.Cut(key, "/"); kind == "native" {
			ex, err := explainNative(ctx, c, group, nsLabels, defaultQueue, events)
			if err != nil {
				return nil, err
			}
			out = append(out, ex)
			continue
		} else if kind == "gang" {
			e.Kind, e.Name = "gang", c.namespace+"/"+group
			var err error
			pg, err = podGroupOf(ctx, c, map[string]*schedv1alpha1.PodGroup{}, c.namespace, group)
			if err != nil {
				return nil, err
			}
			objects["PodGroup/"+group] = true
			// Every member, not only those the selector matched.
			list, err := listPods(ctx, c.kube.CoreV1().Pods(c.namespace), metav1.ListOptions{LabelSelector: schedv1alpha1.PodGroupLabel + "=" + group})
			if err != nil {
				return nil, err
			}
			members = list.Items
		}
		var pgLabels map[string]string
		e.Phase = string(members[0].Status.Phase)
		if pg != nil {
			pgLabels, e.MinMember, e.Phase = pg.Labels, pg.Spec.MinMember, string(pg.Status.Phase)
		}
		e.Queue = flotillav1alpha1.QueueOf(members[0].Labels, pgLabels, nsLabels, defaultQueue)
		e.addMembers(members, objects, events, func(m *corev1.Pod) string {
			return waitingMessage(ctx, c, m, pg, m.Labels[schedv1alpha1.PodGroupLabel])
		})
		if pg != nil && e.Waiting {
			if e.Held = heldRoomOf(events, pg.Name); e.Held != nil {
				own := func(p *corev1.Pod) bool { return p.Labels[schedv1alpha1.PodGroupLabel] == pg.Name }
				if err := e.Held.runningOn(ctx, c, own); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// membersAsked bounds how many waiting members are asked why they wait
// (each answer may read the API) until one gives a reason from the set.
const membersAsked = 5

// addMembers adds the members, in name order, to what is explained: where
// each placed one runs, which wait and why (the first of the first few
// that says a reason from the set, else the first's words), and the
// events of the members and of the objects already named.
func (e *Explanation) addMembers(members []corev1.Pod, objects map[string]bool, events []corev1.Event, whyWaits func(*corev1.Pod) string) {
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	for i := range members {
		m := &members[i]
		objects["Pod/"+m.Name] = true
		switch {
		case m.Spec.NodeName != "":
			e.Placed[m.Name] = m.Spec.NodeName
		case m.DeletionTimestamp == nil && m.Status.Phase == corev1.PodPending:
			e.Pending = append(e.Pending, m.Name)
			if len(e.Pending) <= membersAsked && len(reasons.In(e.Message)) == 0 {
				if why := whyWaits(m); e.Message == "" || len(reasons.In(why)) > 0 {
					e.Message = why
				}
			}
		}
	}
	e.Waiting = len(e.Pending) > 0
	e.Reasons = reasonNames(e.Message)
	e.Events = eventsOf(events, objects)
}

// eventsOf returns the last events of the objects ("Kind/name"), oldest
// first.
func eventsOf(all []corev1.Event, objects map[string]bool) []Event {
	var out []Event
	for _, ev := range all {
		object := ev.InvolvedObject.Kind + "/" + ev.InvolvedObject.Name
		if !objects[object] {
			continue
		}
		out = append(out, Event{Time: eventTime(ev), Object: object, Type: ev.Type, Reason: ev.Reason, Message: ev.Message})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	if len(out) > lastEvents {
		out = out[len(out)-lastEvents:]
	}
	return out
}

// eventTime is when the event last happened: a series' last time, else
// the time an events.k8s.io event was recorded.
func eventTime(ev corev1.Event) time.Time {
	if t := ev.LastTimestamp.Time; !t.IsZero() {
		return t
	}
	if ev.Series != nil && !ev.Series.LastObservedTime.IsZero() {
		return ev.Series.LastObservedTime.Time
	}
	return ev.EventTime.Time
}

func printExplanations(w io.Writer, explanations []Explanation) {
	for i, e := range explanations {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s %s\tqueue %s\tphase %s\n", e.Kind, e.Name, e.Queue, dash(e.Phase))
		if e.Kind == "gang" {
			fmt.Fprintf(w, "members\t%d placed, %d pending, minMember %d\n", len(e.Placed), len(e.Pending), e.MinMember)
		}
		var placed []string
		for pod, node := range e.Placed {
			placed = append(placed, pod+" on "+node)
		}
		sort.Strings(placed)
		for _, p := range placed {
			fmt.Fprintf(w, "  placed\t%s\n", p)
		}
		if !e.Waiting {
			fmt.Fprintln(w, "waiting\tno: nothing of it waits to be placed")
		} else {
			fmt.Fprintf(w, "waiting\t%s\n", strings.Join(e.Pending, ", "))
			fmt.Fprintf(w, "reason\t%s\n", dash(strings.Join(e.Reasons, ", ")))
			fmt.Fprintf(w, "message\t%s\n", e.Message)
		}
		if h := e.Held; h != nil {
			nodes := strings.Join(h.Nodes, ", ")
			if h.Total > len(h.Nodes) {
				nodes += fmt.Sprintf(", … (%d in all)", h.Total)
			}
			fmt.Fprintf(w, "holds room\ton %s: %s\n", nodes, dash(h.Until))
			for _, node := range h.Nodes {
				fmt.Fprintf(w, "  held node\t%s\truns %s\n", node, dash(strings.Join(h.Running[node], ", ")))
			}
		}
		for _, ev := range e.Events {
			fmt.Fprintf(w, "  event\t%s\t%s\t%s\t%s\n", ev.Time.Format(time.RFC3339), ev.Object, ev.Reason, ev.Message)
		}
	}
}
