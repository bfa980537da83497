package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
)

const pollInterval = 50 * time.Millisecond

// Poll calls check every interval until it reports done, fails, or ctx
// ends (or timeout passes, if positive). The error then says what check
// last saw, so a wait that fails says why.
func Poll(ctx context.Context, interval, timeout time.Duration, check func(context.Context) (done bool, seen string, err error)) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	last := "nothing seen yet"
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		done, seen, err := check(ctx)
		if seen != "" {
			last = seen
		}
		return done, err
	})
	if err != nil {
		return fmt.Errorf("%w (last seen: %s)", err, last)
	}
	return nil
}

// WaitForPodBound waits until the pod has a node and returns the node name.
func (cp *ControlPlane) WaitForPodBound(ctx context.Context, namespace, name string, timeout time.Duration) (string, error) {
	var node string
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		pod, err := cp.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = pod.Spec.NodeName
		return node != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("pod %s/%s not bound: %w", namespace, name, err)
	}
	return node, nil
}

// WaitForPodsBound waits until every pod matching the label selector in the
// namespace is bound, and at least want of them exist. It returns pod name →
// node name.
func (cp *ControlPlane) WaitForPodsBound(ctx context.Context, namespace, selector string, want int, timeout time.Duration) (map[string]string, error) {
	var placed map[string]string
	var pending int
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := cp.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		placed, pending = map[string]string{}, 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "" {
				pending++
				continue
			}
			placed[p.Name] = p.Spec.NodeName
		}
		return pending == 0 && len(placed) >= want, nil
	})
	if err != nil {
		return placed, fmt.Errorf("%d of %d pods bound (%d pending) in %s matching %q: %w", len(placed), want, pending, namespace, selector, err)
	}
	return placed, nil
}

// WaitForPodUnschedulable waits until the scheduler has set the pod's
// PodScheduled condition to False, and returns that condition.
func (cp *ControlPlane) WaitForPodUnschedulable(ctx context.Context, namespace, name string, timeout time.Duration) (*corev1.PodCondition, error) {
	var cond *corev1.PodCondition
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		pod, err := cp.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond = PodScheduledCondition(pod)
		return cond != nil && cond.Status == corev1.ConditionFalse, nil
	})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s never reported unschedulable: %w", namespace, name, err)
	}
	return cond, nil
}

// PodScheduledCondition returns the pod's PodScheduled condition, or nil.
func PodScheduledCondition(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// WaitForEvent waits until an event with the reason has been recorded about
// the object (events.k8s.io/v1, which the scheduler writes) and returns it.
func (cp *ControlPlane) WaitForEvent(ctx context.Context, namespace, objectName, reason string, timeout time.Duration) (*eventsv1.Event, error) {
	var found *eventsv1.Event
	selector := fields.OneTermEqualSelector("regarding.name", objectName).String()
	err := wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		events, err := cp.Client.EventsV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return false, err
		}
		for i := range events.Items {
			if events.Items[i].Reason == reason {
				found = &events.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("no %q event for %s/%s: %w", reason, namespace, objectName, err)
	}
	return found, nil
}

// SetPodPhase plays the kubelet for a bound pod: it moves the pod to Running
// (Ready) or to a terminal phase, so status logic can be tested.
func (cp *ControlPlane) SetPodPhase(ctx context.Context, namespace, name string, phase corev1.PodPhase) error {
	pod, err := cp.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		return fmt.Errorf("pod %s/%s is not bound; a kubelet would not run it", namespace, name)
	}
	now := metav1.Now()
	pod.Status.Phase = phase
	ready := corev1.ConditionFalse
	if phase == corev1.PodRunning {
		ready = corev1.ConditionTrue
		pod.Status.StartTime = &now
	}
	setCondition(pod, corev1.PodCondition{Type: corev1.PodReady, Status: ready, LastTransitionTime: now})
	setCondition(pod, corev1.PodCondition{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: now})
	_, err = cp.Client.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	return err
}

func setCondition(pod *corev1.Pod, cond corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == cond.Type {
			pod.Status.Conditions[i] = cond
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, cond)
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

// BoundMembers counts the group's pods that have a node.
func (cp *ControlPlane) BoundMembers(ctx context.Context, namespace, group string) (bound, total int, err error) {
	pods, err := cp.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "scheduling.x-k8s.io/pod-group=" + group})
	if err != nil {
		return 0, 0, err
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			bound++
		}
	}
	return bound, len(pods.Items), nil
}
