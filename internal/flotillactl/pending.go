package flotillactl

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

// PendingEntry is a gang or a plain pod waiting in a queue.
type PendingEntry struct {
	Queue string `json:"queue"`
	// Position is its place in its queue, from 1: the order the
	// scheduler's queue takes them in (flotillav1alpha1.WaitsBefore), as
	// the Queue's status lists them.
	Position int    `json:"position"`
	Kind     string `json:"type"` // gang or pod ("kind" is the printed object's)
	Name     string `json:"name"` // namespace/name
	Priority int32  `json:"priority"`
	// Since is the PodGroup's or the pod's creation.
	Since time.Time `json:"since"`
	// Pending counts its pods not yet bound; MinMember is its PodGroup's.
	Pending   int      `json:"pending"`
	MinMember int32    `json:"minMember,omitempty"`
	Reasons   []string `json:"reasons"`
	Message   string   `json:"message"`
}

func newPendingCommand(o *options) *cobra.Command {
	var queue string
	var schedulerNames []string
	var table tableFlags
	cmd := &cobra.Command{
		Use:   "pending",
		Short: "Pending gangs and pods per queue, in the order the scheduler takes them, with why each waits",
		Example: `  kubectl flotilla pending -A                   # every namespace (needs pods list cluster-wide)
  kubectl flotilla pending -A --queue research  # one queue, with each one's position in it
  kubectl flotilla pending -n ml                # one namespace: what a tenant with view there may read
  kubectl flotilla pending -A --sort-by .since  # the longest waiting first, whatever their queue`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.clients()
			if err != nil {
				return err
			}
			entries, err := pendingEntries(cmd.Context(), c, schedulerNames, o.defaultQueue)
			if err != nil {
				return err
			}
			entries = slices.DeleteFunc(entries, func(e PendingEntry) bool {
				ns, _, _ := strings.Cut(e.Name, "/")
				return queue != "" && e.Queue != queue || c.namespace != "" && ns != c.namespace
			})
			return printRows(o, table, "PendingEntry", entries, func(e PendingEntry) string { return objectName(e.Kind, e.Name) }, pendingColumns)
		},
	}
	table.add(cmd)
	cmd.Flags().StringVar(&queue, "queue", "", "only this queue")
	cmd.Flags().StringSliceVar(&schedulerNames, "scheduler-name", []string{"flotilla-scheduler"}, "the profiles whose pods count")
	return cmd
}

// pendingColumns are the pending table's.
var pendingColumns = []column[PendingEntry]{
	{header: "Queue", cell: func(e PendingEntry) any { return e.Queue }},
	{header: "Position", cell: func(e PendingEntry) any { return e.Position }},
	{header: "Type", cell: func(e PendingEntry) any { return e.Kind }},
	{header: "Name", cell: func(e PendingEntry) any { return e.Name }},
	{header: "Priority", cell: func(e PendingEntry) any { return e.Priority }},
	{header: "Age", cell: func(e PendingEntry) any { return duration.HumanDuration(time.Since(e.Since)) }},
	{header: "Pending", cell: func(e PendingEntry) any { return e.Pending }},
	{header: "Reason", cell: func(e PendingEntry) any { return dash(strings.Join(e.Reasons, ",")) }},
	{header: "Message", cell: func(e PendingEntry) any { return e.Message }},
	{header: "MinMember", wide: true, cell: func(e PendingEntry) any { return e.MinMember }},
	{header: "Since", wide: true, cell: func(e PendingEntry) any { return e.Since.Format(time.RFC3339) }},
}

// pendingEntries reads the unbound pods of the schedulers — of every
// namespace with -A, else of the one namespace, so a tenant with rights in
// its namespace only can list its own — and orders each queue's: with -A
// positions count the whole queue, else the namespace's part of it.
func pendingEntries(ctx context.Context, c *clients, schedulerNames []string, defaultQueue string) ([]PendingEntry, error) {
	pods, err := listPods(ctx, c.kube.CoreV1().Pods(c.namespace), metav1.ListOptions{FieldSelector: "spec.nodeName="})
	if err != nil {
		return nil, err
	}
	// A namespace's queue label places pods that name none; a tenant who
	// may not read namespaces sees them in the default queue.
	namespaceLabels := map[string]map[string]string{}
	if c.namespace != "" {
		if ns, err := c.kube.CoreV1().Namespaces().Get(ctx, c.namespace, metav1.GetOptions{}); err == nil {
			namespaceLabels[ns.Name] = ns.Labels
		}
	} else if list, err := c.kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err == nil {
		for _, ns := range list.Items {
			namespaceLabels[ns.Name] = ns.Labels
		}
	}
	podGroups := map[string]*schedv1alpha1.PodGroup{}
	natives := map[string]*nativeGroup{}
	byKey := map[string]*PendingEntry{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodPending || !slices.Contains(schedulerNames, pod.Spec.SchedulerName) {
			continue
		}
		if name, ok := nativeGroupName(pod); ok {
			if err := addNativeMember(ctx, c, natives, byKey, pod, name, namespaceLabels[pod.Namespace], defaultQueue); err != nil {
				return nil, err
			}
			continue
		}
		group := pod.Labels[schedv1alpha1.PodGroupLabel]
		key := "pod/" + pod.Namespace + "/" + pod.Name
		var pg *schedv1alpha1.PodGroup
		if group != "" {
			key = "gang/" + pod.Namespace + "/" + group
			if pg, err = podGroupOf(ctx, c, podGroups, pod.Namespace, group); err != nil {
				return nil, err
			}
		}
		e := byKey[key]
		if e == nil {
			e = &PendingEntry{Kind: "pod", Name: pod.Namespace + "/" + pod.Name, Since: pod.CreationTimestamp.Time}
			var pgLabels map[string]string
			if group != "" {
				e.Kind, e.Name = "gang", pod.Namespace+"/"+group
				if pg != nil {
					pgLabels, e.Since, e.MinMember = pg.Labels, pg.CreationTimestamp.Time, pg.Spec.MinMember
				}
			}
			e.Queue = flotillav1alpha1.QueueOf(pod.Labels, pgLabels, namespaceLabels[pod.Namespace], defaultQueue)
			if pod.Spec.Priority != nil {
				e.Priority = *pod.Spec.Priority
			}
			byKey[key] = e
		}
		e.Pending++
		if e.Message == "" {
			e.Message = waitingMessage(ctx, c, pod, pg, group)
			e.Reasons = reasonNames(e.Message)
		}
	}
	var entries []PendingEntry
	for _, e := range byKey {
		entries = append(entries, *e)
	}
	sort.Slice(entries, func(i, j int) bool {
		a, b := entries[i], entries[j]
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		return flotillav1alpha1.WaitsBefore(a.Priority, a.Since, a.Name, b.Priority, b.Since, b.Name)
	})
	for i := range entries {
		if i > 0 && entries[i-1].Queue == entries[i].Queue {
			entries[i].Position = entries[i-1].Position + 1
		} else {
			entries[i].Position = 1
		}
	}
	return entries, nil
}

// addNativeMember counts a pending member of a native PodGroup in its
// group's entry; a member of a basic group (no gang) is an entry of its
// own, as the scheduler queues it.
func addNativeMember(ctx context.Context, c *clients, natives map[string]*nativeGroup, byKey map[string]*PendingEntry, pod *corev1.Pod, name string, namespaceLabels map[string]string, defaultQueue string) error {
	g, err := nativeGroupOf(ctx, c, natives, pod.Namespace, name)
	if err != nil {
		return err
	}
	key, e := "native/"+pod.Namespace+"/"+name, &PendingEntry{Kind: "gang", Name: nativeName(pod.Namespace, name), Since: pod.CreationTimestamp.Time}
	switch {
	case g.pg != nil && g.minCount() == 0:
		key, e.Kind, e.Name = "pod/"+pod.Namespace+"/"+pod.Name, "pod", pod.Namespace+"/"+pod.Name
	case g.pg != nil:
		e.Since, e.MinMember = g.pg.CreationTimestamp.Time, g.minCount()
	}
	if existing := byKey[key]; existing != nil {
		e = existing
	} else {
		e.Queue = flotillav1alpha1.QueueOf(pod.Labels, g.labels, namespaceLabels, defaultQueue)
		if pod.Spec.Priority != nil {
			e.Priority = *pod.Spec.Priority
		}
		byKey[key] = e
	}
	e.Pending++
	if e.Message == "" || e.Message == "not tried yet" {
		e.Message = nativeWaitingMessage(ctx, c, pod, g, name)
		e.Reasons = reasonNames(e.Message)
	}
	return nil
}

func podGroupOf(ctx context.Context, c *clients, cache map[string]*schedv1alpha1.PodGroup, namespace, name string) (*schedv1alpha1.PodGroup, error) {
	key := namespace + "/" + name
	if pg, ok := cache[key]; ok {
		return pg, nil
	}
	pg, err := c.podGroups.SchedulingV1alpha1().PodGroups(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		pg, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	cache[key] = pg
	return pg, nil
}

// waitingMessage is why the pod waits: for a gang's member, its
// PodGroup's waiting-message annotation while the scheduler says one;
// else its PodScheduled condition's message once the scheduler tried it. A member the scheduler holds back
// before any attempt (its PodGroup missing, or fewer pods than minMember)
// has no condition; its events say so, and so does this, from the pods
// there are.
func waitingMessage(ctx context.Context, c *clients, pod *corev1.Pod, pg *schedv1alpha1.PodGroup, group string) string {
	if pg != nil && pg.Annotations[flotillav1alpha1.WaitingMessageAnnotation] != "" {
		// The scheduler's word for the whole gang, kept current, over
		// what one member's condition last said.
		return pg.Annotations[flotillav1alpha1.WaitingMessageAnnotation]
	}
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Message != "" {
			return cond.Message
		}
	}
	switch {
	case group != "" && pg == nil:
		return reasons.WaitingForPodGroup.Say("PodGroup %s/%s does not exist", pod.Namespace, group)
	case pg != nil:
		members, err := listPods(ctx, c.kube.CoreV1().Pods(pod.Namespace), metav1.ListOptions{LabelSelector: schedv1alpha1.PodGroupLabel + "=" + group})
		if err != nil {
			return err.Error()
		}
		n := 0
		for _, m := range members.Items {
			if m.DeletionTimestamp == nil && m.Status.Phase != corev1.PodFailed {
				n++
			}
		}
		if int32(n) < pg.Spec.MinMember {
			return reasons.WaitingForMembers.Say("PodGroup %s/%s has %d of its minMember %d pods", pod.Namespace, group, n, pg.Spec.MinMember)
		}
	}
	return "not tried yet"
}

func reasonNames(message string) []string {
	var out []string
	for _, r := range reasons.In(message) {
		out = append(out, string(r))
	}
	return out
}

// objectName is how kubectl names the object behind a gang or a pod
// ("namespace/name"): podgroup/NAME or pod/NAME, for -o name; a native
// group's is podgroups.scheduling.k8s.io/NAME.
func objectName(kind, name string) string {
	_, name, _ = strings.Cut(name, "/")
	if native, ok := strings.CutSuffix(name, " ("+nativeAPIGroup+")"); ok {
		return "podgroups." + nativeAPIGroup + "/" + native
	}
	if kind == "gang" {
		return "podgroup/" + name
	}
	return "pod/" + name
}
