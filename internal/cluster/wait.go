package cluster

import (
	"context"
	"fmt"
	"strings"
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

// WaitForSettled waits until every pod for the named scheduler is either
// bound or marked unschedulable and nothing has changed for quiet, then
// returns the pods. A pod the scheduler has not yet looked at keeps the
// cluster unsettled.
func (cp *ControlPlane) WaitForSettled(ctx context.Context, schedulerName string, quiet, timeout time.Duration) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	var lastVersion string
	var stableSince time.Time
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := cp.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods = pods[:0]
		decided := true
		// The pods' own versions, not the list's: node heartbeats (Lease
		// renewals) move the list's version every few seconds.
		var version strings.Builder
		for _, p := range list.Items {
			if p.Spec.SchedulerName != schedulerName {
				continue
			}
			pods = append(pods, p)
			version.WriteString(string(p.UID) + "@" + p.ResourceVersion + ",")
			if p.Spec.NodeName != "" {
				continue
			}
			if c := PodScheduledCondition(&p); c == nil || c.Status != corev1.ConditionFalse {
				decided = false
			}
		}
		if !decided || version.String() != lastVersion {
			lastVersion, stableSince = version.String(), time.Now()
			return false, nil
		}
		return time.Since(stableSince) >= quiet, nil
	})
	if err != nil {
		return pods, fmt.Errorf("scheduling did not settle: %w", err)
	}
	return pods, nil
}
