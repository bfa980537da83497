package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

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
