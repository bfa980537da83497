package flotillactl

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

// QueueRow is one queue and one resource of it.
type QueueRow struct {
	Queue    string `json:"queue"`
	Depth    int    `json:"depth"`
	Parent   string `json:"parent,omitempty"`
	Weight   int32  `json:"weight"`
	Resource string `json:"resource"`
	// Guarantee and Capability are empty where the queue sets none.
	Guarantee  string `json:"guarantee,omitempty"`
	Capability string `json:"capability,omitempty"`
	Deserved   string `json:"deserved"`
	Allocated  string `json:"allocated"`
	// Pending is what its pending pods ask for: requested less allocated.
	Pending      string `json:"pending"`
	RunningGangs int32  `json:"runningGangs"`
	PendingGangs int32  `json:"pendingGangs"`
	Valid        bool   `json:"valid"`
}

func newQueuesCommand(o *options) *cobra.Command {
	var table tableFlags
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "The queue tree: weight, guarantee, capability, deserved, allocated and pending, per resource",
		Example: `  kubectl flotilla queues
  kubectl flotilla queues -o wide                       # with each queue's parent
  kubectl flotilla queues --sort-by .pendingGangs       # the queues with most waiting gangs last
  kubectl flotilla queues --no-headers -o custom-columns=Q:.queue,ALLOCATED:.allocated
  kubectl flotilla queues -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.clients()
			if err != nil {
				return err
			}
			rows, err := queueRows(cmd.Context(), c)
			if err != nil {
				return err
			}
			return printRows(o, table, "QueueRow", rows, func(r QueueRow) string { return "queue/" + r.Queue }, queueColumns(table.sortBy == ""))
		},
	}
	table.add(cmd)
	return cmd
}

// queueColumns are the queues table's; asTree indents each queue under
// its parent, as the rows come unsorted.
func queueColumns(asTree bool) []column[QueueRow] {
	return []column[QueueRow]{
		{header: "Queue", cell: func(r QueueRow) any {
			if asTree {
				return strings.Repeat("  ", r.Depth) + r.Queue
			}
			return r.Queue
		}},
		{header: "Weight", cell: func(r QueueRow) any { return r.Weight }},
		{header: "Resource", cell: func(r QueueRow) any { return r.Resource }},
		{header: "Guarantee", cell: func(r QueueRow) any { return dash(r.Guarantee) }},
		{header: "Capability", cell: func(r QueueRow) any { return dash(r.Capability) }},
		{header: "Deserved", cell: func(r QueueRow) any { return r.Deserved }},
		{header: "Allocated", cell: func(r QueueRow) any { return r.Allocated }},
		{header: "Pending", cell: func(r QueueRow) any { return r.Pending }},
		{header: "Gangs Running/Pending", cell: func(r QueueRow) any { return fmt.Sprintf("%d/%d", r.RunningGangs, r.PendingGangs) }},
		{header: "Valid", cell: func(r QueueRow) any { return r.Valid }},
		{header: "Parent", wide: true, cell: func(r QueueRow) any { return dash(r.Parent) }},
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// listQueues reads every Queue.
func listQueues(ctx context.Context, c *clients) (map[string]*flotillav1alpha1.Queue, error) {
	list, err := c.dynamic.Resource(flotillav1alpha1.QueueResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing Queues (is the Queue CRD installed?): %w", err)
	}
	out := map[string]*flotillav1alpha1.Queue{}
	for _, item := range list.Items {
		q := &flotillav1alpha1.Queue{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, q); err != nil {
			return nil, fmt.Errorf("Queue %s: %w", item.GetName(), err)
		}
		out[q.Name] = q
	}
	return out, nil
}

// queueRows walks the queue tree depth first, children by name, a row per
// resource any of the queue's lists names.
func queueRows(ctx context.Context, c *clients) ([]QueueRow, error) {
	queues, err := listQueues(ctx, c)
	if err != nil {
		return nil, err
	}
	children := map[string][]string{}
	var roots []string
	for name, q := range queues {
		if q.Spec.Parent != "" && queues[q.Spec.Parent] != nil {
			children[q.Spec.Parent] = append(children[q.Spec.Parent], name)
		} else {
			roots = append(roots, name)
		}
	}
	var rows []QueueRow
	seen := map[string]bool{}
	var walk func(names []string, depth int)
	walk = func(names []string, depth int) {
		sort.Strings(names)
		for _, name := range names {
			if seen[name] {
				continue // a cycle of parents: the scheduler marks it invalid
			}
			seen[name] = true
			rows = append(rows, rowsOf(queues[name], depth)...)
			walk(children[name], depth+1)
		}
	}
	walk(roots, 0)
	var rest []string
	for name := range queues {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	walk(rest, 0)
	return rows, nil
}

func rowsOf(q *flotillav1alpha1.Queue, depth int) []QueueRow {
	names := map[corev1.ResourceName]bool{}
	for _, list := range []corev1.ResourceList{q.Spec.Guarantee, q.Spec.Capability, q.Status.Deserved, q.Status.Allocated, q.Status.Requested} {
		for name := range list {
			names[name] = true
		}
	}
	if len(names) == 0 {
		names[corev1.ResourceCPU] = true
	}
	valid := true
	for _, cond := range q.Status.Conditions {
		if cond.Type == "Valid" && cond.Status == metav1.ConditionFalse {
			valid = false
		}
	}
	var sorted []string
	for name := range names {
		sorted = append(sorted, string(name))
	}
	sort.Strings(sorted)
	var rows []QueueRow
	for _, name := range sorted {
		res := corev1.ResourceName(name)
		pending := q.Status.Requested[res].DeepCopy()
		pending.Sub(q.Status.Allocated[res])
		rows = append(rows, QueueRow{
			Queue: q.Name, Depth: depth, Parent: q.Spec.Parent, Weight: q.Spec.Weight, Resource: name,
			Guarantee: quantityOrEmpty(q.Spec.Guarantee, res), Capability: quantityOrEmpty(q.Spec.Capability, res),
			Deserved: quantity(q.Status.Deserved, res), Allocated: quantity(q.Status.Allocated, res), Pending: pending.String(),
			RunningGangs: q.Status.RunningGangs, PendingGangs: q.Status.PendingGangs, Valid: valid,
		})
	}
	return rows
}

func quantity(list corev1.ResourceList, name corev1.ResourceName) string {
	v := list[name]
	return v.String()
}

func quantityOrEmpty(list corev1.ResourceList, name corev1.ResourceName) string {
	if v, ok := list[name]; ok {
		return v.String()
	}
	return ""
}
