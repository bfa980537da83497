package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	resourcehelper "k8s.io/component-helpers/resource"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/internal/flotillactl"
	"github.com/flotilla-sched/flotilla/plugins/gang"
	"github.com/flotilla-sched/flotilla/plugins/state"
)

// printSummary shows where every pod went, how each gang stands and how
// full each node is.
func printSummary(ctx context.Context, out io.Writer, cp *cluster.ControlPlane, pods []corev1.Pod) error {
	sort.Slice(pods, func(i, j int) bool {
		return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name
	})
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nPODS\tNODE\tSTATUS")
	for _, p := range pods {
		node, status := p.Spec.NodeName, "bound, "+string(p.Status.Phase)
		if node == "" {
			node, status = "-", "pending"
			if c := cluster.PodScheduledCondition(&p); c != nil {
				status = c.Reason + ": " + c.Message
			}
		}
		fmt.Fprintf(w, "%s/%s\t%s\t%s\n", p.Namespace, p.Name, node, status)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := printGangs(ctx, out, cp, pods); err != nil {
		return err
	}
	if err := printQueues(ctx, out, cp); err != nil {
		return err
	}
	return printNodes(ctx, out, cp)
}

func printGangs(ctx context.Context, out io.Writer, cp *cluster.ControlPlane, pods []corev1.Pod) error {
	groups, err := cp.PodGroups.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	type gang struct {
		key       state.GroupKey
		minMember int32
	}
	var gangs []gang
	for _, g := range groups.Items {
		gangs = append(gangs, gang{state.GroupKey{Namespace: g.Namespace, Name: g.Name}, g.Spec.MinMember})
	}
	// Native gangs, where the cluster serves them (--native-gangs).
	if native, err := cp.Client.SchedulingV1beta1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{}); err == nil {
		for _, g := range native.Items {
			if policy := g.Spec.SchedulingPolicy.Gang; policy != nil {
				gangs = append(gangs, gang{state.GroupKey{Namespace: g.Namespace, Name: g.Name, Native: true}, policy.MinCount})
			}
		}
	}
	if len(gangs) == 0 {
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nGANGS\tMIN MEMBER\tMEMBERS\tBOUND\tSTATE")
	for _, g := range gangs {
		var members, bound int32
		for i := range pods {
			if key, ok := state.GroupOf(&pods[i]); ok && key == g.key {
				members++
				if pods[i].Spec.NodeName != "" {
					bound++
				}
			}
		}
		status := "waiting"
		switch {
		case bound >= g.minMember:
			status = "complete (quorum bound)"
		case bound > 0:
			status = "PARTIAL"
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\n", g.key, g.minMember, members, bound, status)
	}
	return w.Flush()
}

func printNodes(ctx context.Context, out io.Writer, cp *cluster.ControlPlane) error {
	nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pods, err := cp.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	requested := map[string]corev1.ResourceList{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		sum := requested[p.Spec.NodeName]
		if sum == nil {
			sum = corev1.ResourceList{}
		}
		for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			total := sum[name]
			total.Add(q)
			sum[name] = total
		}
		requested[p.Spec.NodeName] = sum
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nNODES\tCPU\tMEMORY\tGPU")
	for _, n := range nodes.Items {
		req := requested[n.Name]
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", n.Name,
			usage(req, n.Status.Allocatable, corev1.ResourceCPU),
			usage(req, n.Status.Allocatable, corev1.ResourceMemory),
			usage(req, n.Status.Allocatable, cluster.GPU))
	}
	return w.Flush()
}

func usage(req, alloc corev1.ResourceList, name corev1.ResourceName) string {
	total, ok := alloc[name]
	if !ok || total.IsZero() {
		return "-"
	}
	used := req[name]
	return fmt.Sprintf("%s/%s (%d%%)", quantity(used, name), quantity(total, name), used.MilliValue()*100/total.MilliValue())
}

func quantity(q resource.Quantity, name corev1.ResourceName) string {
	if name == corev1.ResourceMemory {
		return fmt.Sprintf("%dGi", q.Value()>>30)
	}
	return q.String()
}

// listQueues reads every Queue, by name.
func listQueues(ctx context.Context, cp *cluster.ControlPlane) ([]flotillav1alpha1.Queue, error) {
	list, err := cp.Dynamic.Resource(flotillav1alpha1.QueueResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]flotillav1alpha1.Queue, len(list.Items))
	for i, item := range list.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &out[i]); err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func printQueues(ctx context.Context, out io.Writer, cp *cluster.ControlPlane) error {
	queues, err := listQueues(ctx, cp)
	if err != nil || len(queues) == 0 {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nQUEUES\tWEIGHT\tDESERVED CPU/MEM/GPU\tALLOCATED CPU/MEM/GPU\tVALID")
	for _, q := range queues {
		valid := "-"
		if c := meta.FindStatusCondition(q.Status.Conditions, "Valid"); c != nil {
			valid = string(c.Status)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", q.Name, q.Spec.Weight, triple(q.Status.Deserved), triple(q.Status.Allocated), valid)
	}
	return w.Flush()
}

func triple(r corev1.ResourceList) string {
	q := func(name corev1.ResourceName) string {
		v, ok := r[name]
		if !ok {
			return "0"
		}
		return quantity(v, name)
	}
	return q(corev1.ResourceCPU) + "/" + q(corev1.ResourceMemory) + "/" + q(cluster.GPU)
}

// watcher follows the examples as they run: a status line every two
// seconds, and the first gang seen waiting, with what kubectl flotilla
// says of it then.
type watcher struct {
	cp         *cluster.ControlPlane
	start      time.Time
	kubeconfig string
	// waited is the first gang seen waiting, at, and why said of it.
	waited, why string
	at          time.Duration
}

// waitForJobs prints a status line every two seconds until every wave is
// applied and every Job has finished, then the Jobs' table.
func (w *watcher) waitForJobs(ctx context.Context, out io.Writer, applied <-chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	allApplied := false
	for {
		if !allApplied {
			select {
			case err := <-applied:
				if err != nil {
					return err
				}
				allApplied = true
			default:
			}
		}
		line, err := w.statusLine(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, line)
		w.noticeWaiting(ctx, out)
		jobs, err := w.cp.Client.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		done := 0
		for i := range jobs.Items {
			if finished, _ := cluster.JobFinished(&jobs.Items[i]); finished {
				done++
			}
		}
		if allApplied && done == len(jobs.Items) {
			return printJobs(out, jobs.Items, w.start)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d Jobs finished after %s", done, len(jobs.Items), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// statusLine is one line of how things stand: Jobs, pods by phase, the
// pods reclaimed for other queues so far, each queue's allocated against
// deserved cpu, and the gangs waiting, by their reason.
func (w *watcher) statusLine(ctx context.Context) (string, error) {
	cp := w.cp
	jobs, err := cp.Client.BatchV1().Jobs(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	done := 0
	for i := range jobs.Items {
		if finished, _ := cluster.JobFinished(&jobs.Items[i]); finished {
			done++
		}
	}
	pods, err := cp.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	phases := map[corev1.PodPhase]int{}
	for _, p := range pods.Items {
		phases[p.Status.Phase]++
	}
	reclaimed, err := cp.Client.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reason=Reclaimed"})
	if err != nil {
		return "", err
	}
	queues, err := listQueues(ctx, cp)
	if err != nil {
		return "", err
	}
	var shares []string
	for _, q := range queues {
		alloc, des := q.Status.Allocated[corev1.ResourceCPU], q.Status.Deserved[corev1.ResourceCPU]
		shares = append(shares, fmt.Sprintf("%s %.0f/%.0f", q.Name, alloc.AsApproximateFloat64(), des.AsApproximateFloat64()))
	}
	waiting, err := waitingGangs(ctx, cp)
	if err != nil {
		return "", err
	}
	var gangs []string
	for _, g := range waiting {
		gangs = append(gangs, g.name+" ("+g.reason+")")
	}
	line := fmt.Sprintf("t=%3.0fs  jobs %d/%d done  pods %d running, %d pending, %d succeeded, %d failed, %d reclaimed  queues cpu allocated/deserved: %s",
		time.Since(w.start).Seconds(), done, len(jobs.Items), phases[corev1.PodRunning], phases[corev1.PodPending], phases[corev1.PodSucceeded], phases[corev1.PodFailed],
		len(reclaimed.Items), strings.Join(shares, ", "))
	if len(gangs) > 0 {
		line += "  waiting: " + strings.Join(gangs, ", ")
	}
	return line, nil
}

// waitingGang is a gang that waits, by namespace/name, with the reason
// the scheduler gives on its PodGroup and the message.
type waitingGang struct {
	namespace, name, reason, message string
}

// waitingGangs are the gangs whose PodGroup says why they wait and that
// have no member bound yet, by name.
func waitingGangs(ctx context.Context, cp *cluster.ControlPlane) ([]waitingGang, error) {
	groups, err := cp.PodGroups.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []waitingGang
	for _, g := range groups.Items {
		reason, message := g.Annotations[flotillav1alpha1.WaitingReasonAnnotation], g.Annotations[flotillav1alpha1.WaitingMessageAnnotation]
		switch g.Status.Phase {
		case schedv1alpha1.PodGroupRunning, schedv1alpha1.PodGroupFinished, schedv1alpha1.PodGroupFailed, gang.PodGroupScheduled:
			continue
		}
		if reason == "" || g.Status.Running > 0 {
			continue
		}
		out = append(out, waitingGang{namespace: g.Namespace, name: g.Namespace + "/" + g.Name, reason: reason, message: message})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// noticeWaiting prints, the first time a gang is seen waiting, its
// message and what `kubectl flotilla why` says of it, and keeps both for
// the summary.
func (w *watcher) noticeWaiting(ctx context.Context, out io.Writer) {
	if w.waited != "" {
		return
	}
	waiting, err := waitingGangs(ctx, w.cp)
	if err != nil || len(waiting) == 0 {
		return
	}
	g := waiting[0]
	var why bytes.Buffer
	cmd := flotillactl.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &why, ErrOut: &why}, "")
	_, name, _ := strings.Cut(g.name, "/")
	cmd.SetArgs([]string{"--kubeconfig", w.kubeconfig, "why", "podgroup", name, "-n", g.namespace})
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(&why, "kubectl flotilla why: %v\n", err)
	}
	w.waited, w.why, w.at = g.name, why.String(), time.Since(w.start)
	fmt.Fprintf(out, "         gang %s waits: %s\n", g.name, g.message)
}

// printWaited prints what kubectl flotilla said of the first gang seen
// waiting, while it waited.
func (w *watcher) printWaited(out io.Writer) {
	if w.waited == "" {
		return
	}
	_, name, _ := strings.Cut(w.waited, "/")
	fmt.Fprintf(out, "\nWHILE GANG %s WAITED (t=%.0fs): kubectl flotilla why podgroup %s\n%s", w.waited, w.at.Seconds(), name, w.why)
}

// objectNames lists objects as kind namespace/name.
func objectNames(objs []*unstructured.Unstructured) string {
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
	}
	return strings.Join(names, ", ")
}

func printJobs(out io.Writer, jobs []batchv1.Job, start time.Time) error {
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].Name < jobs[j].Name })
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "\nJOBS\tRESULT\tSUCCEEDED\tFAILED\tFINISHED AT")
	for i := range jobs {
		j := &jobs[i]
		_, how := cluster.JobFinished(j)
		at := "-"
		if j.Status.CompletionTime != nil {
			at = fmt.Sprintf("t=%.0fs", j.Status.CompletionTime.Sub(start).Seconds())
		}
		fmt.Fprintf(w, "%s/%s\t%s\t%d\t%d\t%s\n", j.Namespace, j.Name, how, j.Status.Succeeded, j.Status.Failed, at)
	}
	return w.Flush()
}
