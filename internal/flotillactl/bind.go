package flotillactl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// bind-scheduler is the recovery of mode=replace-default when every
// replica is lost: flotilla-scheduler is then the cluster's only
// scheduler, so nothing schedules its own new pods, and they wait for
// ever. The command does for them what a scheduler's bind does (the
// pods/binding subresource), onto nodes it checks as kube-scheduler's
// filters would for these pods: Ready and not cordoned, their taints
// tolerated, the pod's node selector and required node affinity, and room
// for its requests; one replica per node where it can (the chart's
// anti-affinity). A replica that runs takes the lease and schedules the
// rest of the cluster.

// schedulerSelector selects the chart's scheduler pods.
const schedulerSelector = "app.kubernetes.io/name=flotilla-scheduler"

func newBindSchedulerCommand(o *options) *cobra.Command {
	var selector, lease string
	var only []string
	var dryRun, force bool
	cmd := &cobra.Command{
		Use:   "bind-scheduler",
		Short: "Bind flotilla-scheduler's own pending pods to nodes when no scheduler runs (replace-default recovery)",
		Long: `Bind flotilla-scheduler's own pending pods to nodes, as a scheduler's bind
does. With mode=replace-default flotilla-scheduler is the cluster's only
scheduler: when every replica is lost (their nodes drained or gone, a bad
upgrade), nothing schedules their replacements. This picks for each pending
pod a node that is Ready and not cordoned, whose taints it tolerates, that
its node selector and required node affinity accept and that has room for
its requests, one replica per node where it can, and binds it. It binds
nothing while a scheduler renews the lease (--lease, kube-system/kube-scheduler
for replace-default): that scheduler places the pods itself. See the
FlotillaNoLeader runbook (docs/runbooks.md).`,
		Example: `  kubectl flotilla bind-scheduler -n flotilla-system --dry-run   # the nodes it would pick
  kubectl flotilla bind-scheduler -n flotilla-system
  kubectl flotilla bind-scheduler -n flotilla-system --node system-1 --node system-2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.clients()
			if err != nil {
				return err
			}
			if c.namespace == "" {
				return fmt.Errorf("bind-scheduler needs the scheduler's namespace: -n, not -A")
			}
			if !force {
				if held, err := leaseHeld(cmd.Context(), c, lease, time.Now()); err != nil || held != "" {
					if err != nil {
						return err
					}
					return fmt.Errorf("%s; it schedules these pods itself (--force binds them anyway)", held)
				}
			}
			return bindScheduler(cmd.Context(), c, o.streams.Out, selector, only, dryRun)
		},
	}
	cmd.Flags().StringVar(&lease, "lease", "kube-system/kube-scheduler", "the scheduler's lease (NAMESPACE/NAME): while a holder renews it, nothing is bound")
	cmd.Flags().BoolVar(&force, "force", false, "bind even while the lease is held")
	cmd.Flags().StringVarP(&selector, "selector", "l", schedulerSelector, "the scheduler's pods")
	cmd.Flags().StringSliceVar(&only, "node", nil, "bind only to these nodes (repeat or comma-separate)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say where each pod would go and bind none")
	return cmd
}

func bindScheduler(ctx context.Context, c *clients, out io.Writer, selector string, only []string, dryRun bool) error {
	own, err := listPods(ctx, c.kube.CoreV1().Pods(c.namespace), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	var pending []corev1.Pod
	for _, p := range own.Items {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodPending && len(p.Spec.SchedulingGates) == 0 {
			pending = append(pending, p)
		}
	}
	if len(pending) == 0 {
		fmt.Fprintf(out, "No pending pods in %s match %s: nothing to bind.\n", c.namespace, selector)
		return nil
	}
	nodes, err := c.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	live := fields.AndSelectors(fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)), fields.OneTermNotEqualSelector("spec.nodeName", ""))
	bound, err := listPods(ctx, c.kube.CoreV1().Pods(metav1.NamespaceAll), metav1.ListOptions{FieldSelector: live.String()})
	if err != nil {
		return err
	}
	var replicas []corev1.Pod
	for _, p := range own.Items {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			replicas = append(replicas, p)
		}
	}
	plan, unplaced := planBindings(pending, nodes.Items, bound.Items, replicas, sets.New(only...))
	for _, b := range plan {
		if dryRun {
			fmt.Fprintf(out, "pod/%s would be bound to node %s (dry run)\n", b.pod.Name, b.node)
			continue
		}
		err := c.kube.CoreV1().Pods(b.pod.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: b.pod.Name, UID: b.pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: b.node},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("binding pod %s to node %s: %w", b.pod.Name, b.node, err)
		}
		fmt.Fprintf(out, "pod/%s bound to node %s\n", b.pod.Name, b.node)
	}
	if len(unplaced) > 0 {
		return fmt.Errorf("%s", strings.Join(unplaced, "\n"))
	}
	return nil
}

// leaseHeld says who holds the lease (namespace/name) if its holder
// renewed it within its duration at now, or "" when nobody does (no
// lease, no holder, or a holder gone past its duration).
func leaseHeld(ctx context.Context, c *clients, lease string, now time.Time) (string, error) {
	namespace, name, ok := strings.Cut(lease, "/")
	if !ok || namespace == "" || name == "" {
		return "", fmt.Errorf("--lease %q: NAMESPACE/NAME", lease)
	}
	l, err := c.kube.CoordinationV1().Leases(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the lease %s: %w", lease, err)
	}
	return heldBy(l, now), nil
}

// heldBy is leaseHeld's judgement of a lease read at now.
func heldBy(l *coordinationv1.Lease, now time.Time) string {
	spec := l.Spec
	if spec.HolderIdentity == nil || *spec.HolderIdentity == "" || spec.RenewTime == nil || spec.LeaseDurationSeconds == nil {
		return ""
	}
	age := now.Sub(spec.RenewTime.Time)
	if age > time.Duration(*spec.LeaseDurationSeconds)*time.Second {
		return ""
	}
	return fmt.Sprintf("%s holds the lease %s/%s (renewed %s ago, for %ds)", *spec.HolderIdentity, l.Namespace, l.Name, age.Round(time.Second), *spec.LeaseDurationSeconds)
}

// binding is a pending pod and the node picked for it.
type binding struct {
	pod  *corev1.Pod
	node string
}

// planBindings picks a node for each pending pod, oldest first: among
// the nodes that pass nodeRefuses (only those named in only, when any),
// the one with the fewest of the scheduler's replicas (bound ones and
// those planned before it), then the most free cpu, then by name. What
// bound lists, and the pods planned before, take their requests from a
// node's allocatable. unplaced says, for each pod no node takes, why each
// node refused it.
func planBindings(pending []corev1.Pod, nodes []corev1.Node, bound []corev1.Pod, replicas []corev1.Pod, only sets.Set[string]) (plan []binding, unplaced []string) {
	pending = slices.Clone(pending)
	sort.SliceStable(pending, func(i, j int) bool {
		if !pending[i].CreationTimestamp.Equal(&pending[j].CreationTimestamp) {
			return pending[i].CreationTimestamp.Before(&pending[j].CreationTimestamp)
		}
		return pending[i].Name < pending[j].Name
	})
	used := map[string]corev1.ResourceList{}
	podsOn := map[string]int64{}
	for i := range bound {
		p := &bound[i]
		add(used, p.Spec.NodeName, resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}))
		podsOn[p.Spec.NodeName]++
	}
	replicasOn := map[string]int{}
	for _, p := range replicas {
		replicasOn[p.Spec.NodeName]++
	}
	for i := range pending {
		pod := &pending[i]
		asks := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		best := -1
		refusedBy := map[string][]string{}
		for n := range nodes {
			node := &nodes[n]
			if why := nodeRefuses(pod, asks, node, used[node.Name], podsOn[node.Name], only); why != "" {
				refusedBy[why] = append(refusedBy[why], node.Name)
				continue
			}
			if best < 0 || better(node, &nodes[best], replicasOn, used) {
				best = n
			}
		}
		if best < 0 {
			unplaced = append(unplaced, fmt.Sprintf("pod %s fits no node: %s", pod.Name, summarize(refusedBy, len(nodes))))
			continue
		}
		name := nodes[best].Name
		plan = append(plan, binding{pod: pod, node: name})
		add(used, name, asks)
		podsOn[name]++
		replicasOn[name]++
	}
	return plan, unplaced
}

// better reports whether node a is the better pick than b.
func better(a, b *corev1.Node, replicasOn map[string]int, used map[string]corev1.ResourceList) bool {
	if ra, rb := replicasOn[a.Name], replicasOn[b.Name]; ra != rb {
		return ra < rb
	}
	fa, fb := free(a, used[a.Name], corev1.ResourceCPU), free(b, used[b.Name], corev1.ResourceCPU)
	if c := fa.Cmp(fb); c != 0 {
		return c > 0
	}
	return a.Name < b.Name
}

// nodeRefuses says why the pod may not be bound to the node, or "".
func nodeRefuses(pod *corev1.Pod, asks corev1.ResourceList, node *corev1.Node, used corev1.ResourceList, pods int64, only sets.Set[string]) string {
	if only.Len() > 0 && !only.Has(node.Name) {
		return "not named by --node"
	}
	if node.DeletionTimestamp != nil {
		return "being deleted"
	}
	if !nodeReady(node) {
		return "not Ready"
	}
	if node.Spec.Unschedulable {
		return "cordoned"
	}
	noScheduleOrExecute := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	if taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, noScheduleOrExecute, true); untolerated {
		return fmt.Sprintf("taint %s not tolerated", taint.ToString())
	}
	if match, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !match {
		return "not selected by the pod's nodeSelector or required node affinity"
	}
	if allowed := node.Status.Allocatable.Pods(); !allowed.IsZero() && pods >= allowed.Value() {
		return fmt.Sprintf("full: %d pods, its maximum", pods)
	}
	names := make([]corev1.ResourceName, 0, len(asks))
	for name := range asks {
		names = append(names, name)
	}
	slices.Sort(names)
	var short []string
	for _, name := range names {
		want := asks[name]
		if want.IsZero() {
			continue
		}
		if have := free(node, used, name); have.Cmp(want) < 0 {
			short = append(short, fmt.Sprintf("%s (%s free, %s asked)", name, have.String(), want.String()))
		}
	}
	if len(short) > 0 {
		return "insufficient " + strings.Join(short, ", ")
	}
	return ""
}

// free is the node's allocatable of the resource less what used takes.
func free(node *corev1.Node, used corev1.ResourceList, name corev1.ResourceName) resource.Quantity {
	have := node.Status.Allocatable[name].DeepCopy()
	have.Sub(used[name])
	return have
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func add(used map[string]corev1.ResourceList, node string, requests corev1.ResourceList) {
	list := used[node]
	if list == nil {
		list = corev1.ResourceList{}
		used[node] = list
	}
	for name, q := range requests {
		sum := list[name]
		sum.Add(q)
		list[name] = sum
	}
}

// summarize is why the nodes refused a pod, most common reason first,
// naming a few nodes for each.
func summarize(refusedBy map[string][]string, nodes int) string {
	if nodes == 0 {
		return "the cluster has no nodes"
	}
	whys := make([]string, 0, len(refusedBy))
	for why := range refusedBy {
		whys = append(whys, why)
	}
	sort.Slice(whys, func(i, j int) bool {
		if len(refusedBy[whys[i]]) != len(refusedBy[whys[j]]) {
			return len(refusedBy[whys[i]]) > len(refusedBy[whys[j]])
		}
		return whys[i] < whys[j]
	})
	parts := make([]string, len(whys))
	for i, why := range whys {
		names := refusedBy[why]
		slices.Sort(names)
		shown := strings.Join(names[:min(len(names), 3)], ", ")
		if len(names) > 3 {
			shown += fmt.Sprintf(" and %d more", len(names)-3)
		}
		parts[i] = fmt.Sprintf("%d node(s) %s (%s)", len(names), why, shown)
	}
	return strings.Join(parts, "; ")
}
