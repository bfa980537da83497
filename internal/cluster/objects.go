package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// FlotillaSchedulerName is the profile workloads opt into.
const FlotillaSchedulerName = "flotilla-scheduler"

// DefaultMemoryPerCPU is the memory a harness pod requests per cpu unless
// it says otherwise: a quarter of what the usual test node (8 cpu, 32Gi)
// has per cpu, so memory is asked for, accounted and shared, and binds
// only where a test makes it.
var DefaultMemoryPerCPU = resource.MustParse("1Gi")

// GPU is the extended resource the harness's GPU nodes advertise.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// NodeSpec describes a fake node's capacity.
type NodeSpec struct {
	Name   string
	CPU    string // e.g. "8"
	Memory string // e.g. "32Gi"
	Pods   int64  // default 110
	// Extended resources, e.g. {GPU: "8"}.
	Extended map[corev1.ResourceName]string
	Labels   map[string]string
}

// Topology labels the examples in manifests/examples place gangs by.
const (
	ZoneLabel   = "topology.kubernetes.io/zone"
	RackLabel   = "example.com/rack"
	CliqueLabel = "nvidia.com/gpu.clique"
)

// TopologyLabels are a node's zone, rack and (if not empty) NVLink clique
// labels.
func TopologyLabels(zone, rack, clique string) map[string]string {
	labels := map[string]string{ZoneLabel: zone, RackLabel: rack}
	if clique != "" {
		labels[CliqueLabel] = clique
	}
	return labels
}

// Node builds a Ready node whose capacity and allocatable are the spec's.
func Node(spec NodeSpec) *corev1.Node {
	pods := spec.Pods
	if pods == 0 {
		pods = 110
	}
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(spec.CPU),
		corev1.ResourceMemory: resource.MustParse(spec.Memory),
		corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
	}
	for name, q := range spec.Extended {
		rl[name] = resource.MustParse(q)
	}
	// Every node is the kubelet simulator's (see StartRealistic); without
	// it running, the label does nothing.
	labels := map[string]string{corev1.LabelHostname: spec.Name, ManagedNodeLabel: managedNodeValue}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity:    rl,
			Allocatable: rl,
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "FakeKubelet"}},
			Phase:       corev1.NodeRunning,
		},
	}
}

// PodSpec describes a single-container pod.
type PodSpec struct {
	Namespace string
	Name      string
	// SchedulerName defaults to flotilla-scheduler.
	SchedulerName string
	CPU           string // request, e.g. "500m"; empty for none
	// Memory request; empty means DefaultMemoryPerCPU for each cpu, as
	// ordinary pods ask for both.
	Memory string
	// CPUOnly leaves memory out: for a test that needs a single resource,
	// which says why.
	CPUOnly  bool
	Extended map[corev1.ResourceName]string
	Labels   map[string]string
	// PodGroup puts the pod in a scheduler-plugins PodGroup of that name.
	PodGroup string
	// NativePodGroup puts the pod in Kubernetes' own PodGroup of that name
	// (scheduling.k8s.io, spec.schedulingGroup), which the apiserver keeps
	// only with the GenericWorkload gate on (NativeGroupsAPIServerFlags).
	NativePodGroup    string
	PriorityClassName string
	// NodeName places the pod directly, bypassing every scheduler, as a
	// DaemonSet or a static pod would be.
	NodeName string
	// GracePeriodSeconds is the pod's terminationGracePeriodSeconds. The
	// default, 1, keeps evictions quick in tests, as WorkloadSpec's does;
	// the simulated kubelet honours whatever is set (Kubernetes' own
	// default, 30, would hold a victim's room for 30 s).
	GracePeriodSeconds *int64
}

// Pod builds the pod. Limits equal requests, as accelerators require.
func Pod(spec PodSpec) *corev1.Pod {
	scheduler := spec.SchedulerName
	if scheduler == "" {
		scheduler = FlotillaSchedulerName
	}
	requests := corev1.ResourceList{}
	if spec.CPU != "" {
		requests[corev1.ResourceCPU] = resource.MustParse(spec.CPU)
	}
	switch {
	case spec.Memory != "":
		requests[corev1.ResourceMemory] = resource.MustParse(spec.Memory)
	case spec.CPU != "" && !spec.CPUOnly:
		cpu := resource.MustParse(spec.CPU)
		requests[corev1.ResourceMemory] = *resource.NewQuantity(cpu.MilliValue()*DefaultMemoryPerCPU.Value()/1000, resource.BinarySI)
	}
	for name, q := range spec.Extended {
		requests[name] = resource.MustParse(q)
	}
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	if spec.PodGroup != "" {
		labels[schedv1alpha1.PodGroupLabel] = spec.PodGroup
	}
	ns := spec.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	grace := spec.GracePeriodSeconds
	if grace == nil {
		one := int64(1)
		grace = &one
	}
	var group *corev1.PodSchedulingGroup
	if spec.NativePodGroup != "" {
		group = &corev1.PodSchedulingGroup{PodGroupName: &spec.NativePodGroup}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: spec.Name, Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName:                 scheduler,
			NodeName:                      spec.NodeName,
			PriorityClassName:             spec.PriorityClassName,
			TerminationGracePeriodSeconds: grace,
			SchedulingGroup:               group,
			Containers: []corev1.Container{{
				Name:      "main",
				Image:     "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: requests.DeepCopy()},
			}},
		},
	}
}

// PodGroup builds a scheduler-plugins PodGroup.
func PodGroup(namespace, name string, minMember int32) *schedv1alpha1.PodGroup {
	return &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: minMember},
	}
}

// NativeGang builds Kubernetes' own PodGroup (scheduling.k8s.io/v1beta1)
// with a gang policy of minCount and no Workload, as upstream's
// scheduler_perf gang case makes them.
func NativeGang(namespace, name string, minCount int32) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}},
	}
}

// CreatePriorityClass creates a PriorityClass; never makes its pods
// preemptionPolicy: Never.
func (cp *ControlPlane) CreatePriorityClass(ctx context.Context, name string, value int32, never bool) error {
	return CreatePriorityClass(ctx, cp.Client, name, value, never)
}

// CreatePriorityClass does the same against any cluster the client reaches.
func CreatePriorityClass(ctx context.Context, client kubernetes.Interface, name string, value int32, never bool) error {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if never {
		policy := corev1.PreemptNever
		pc.PreemptionPolicy = &policy
	}
	if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		return err
	}
	// The apiserver's Priority admission resolves a pod's class from its
	// own informer, which can lag the create: a pod made at once was
	// refused ("no PriorityClass with name low-10 was found"). Wait until a
	// dry-run pod of the class is admitted.
	probe := Pod(PodSpec{Name: "priority-class-probe", CPU: "1", Memory: "1Gi", PriorityClassName: name})
	return Poll(ctx, 50*time.Millisecond, 10*time.Second, func(ctx context.Context) (bool, string, error) {
		_, err := client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "no PriorityClass with name") {
			return false, err.Error(), nil
		}
		return true, "", err
	})
}

// CreateNodes creates the nodes.
func (cp *ControlPlane) CreateNodes(ctx context.Context, specs ...NodeSpec) error {
	for _, s := range specs {
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, Node(s), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", s.Name, err)
		}
	}
	return nil
}

// CreatePods creates the pods.
func (cp *ControlPlane) CreatePods(ctx context.Context, specs ...PodSpec) error {
	for _, s := range specs {
		p := Pod(s)
		if _, err := cp.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating pod %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// CreateNamespace creates a namespace.
func (cp *ControlPlane) CreateNamespace(ctx context.Context, name string) error {
	_, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

// CreatePodGroup creates a scheduler-plugins PodGroup.
func (cp *ControlPlane) CreatePodGroup(ctx context.Context, namespace, name string, minMember int32) error {
	_, err := cp.PodGroups.SchedulingV1alpha1().PodGroups(namespace).Create(ctx, PodGroup(namespace, name, minMember), metav1.CreateOptions{})
	return err
}

// GangPods returns n member specs of a gang, named <group>-<i>, each
// requesting cpu.
func GangPods(namespace, group string, n int, cpu string) []PodSpec {
	specs := make([]PodSpec, n)
	for i := range specs {
		specs[i] = PodSpec{Namespace: namespace, Name: fmt.Sprintf("%s-%d", group, i), PodGroup: group, CPU: cpu}
	}
	return specs
}

// CreateQueue creates a flotilla Queue.
func (cp *ControlPlane) CreateQueue(ctx context.Context, q *flotillav1alpha1.Queue) error {
	q.APIVersion, q.Kind = flotillav1alpha1.SchemeGroupVersion.String(), "Queue"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(q)
	if err != nil {
		return err
	}
	_, err = cp.Dynamic.Resource(flotillav1alpha1.QueueResource).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	return err
}

// GetQueue reads a flotilla Queue.
func (cp *ControlPlane) GetQueue(ctx context.Context, name string) (*flotillav1alpha1.Queue, error) {
	u, err := cp.Dynamic.Resource(flotillav1alpha1.QueueResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	q := &flotillav1alpha1.Queue{}
	return q, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, q)
}

// Queue builds a Queue with a weight and an optional parent.
func Queue(name string, weight int32, parent string) *flotillav1alpha1.Queue {
	return &flotillav1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       flotillav1alpha1.QueueSpec{Weight: weight, Parent: parent},
	}
}
