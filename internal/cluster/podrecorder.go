package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// PodRecorder records every pod's life as a watch sees it: when the
// workload started creating it, when it existed, when it was first seen
// bound and where, when it was first reported unschedulable, when it
// finished, its Job; and any pod seen bound to one node and then another.
// The benchmarks read their timings from it, the scenario tests their
// "nothing bound twice" invariant: one recorder for both, so they count
// the same way. Pods are named by name within the recorded namespace (a
// Job's pods have unique names); rebinding is checked by UID.
type PodRecorder struct {
	mu                              sync.Mutex
	createStart, createdAt, boundAt map[string]time.Time
	firstCreate                     time.Time
	// attemptedAt: when a pod was first reported unschedulable.
	attemptedAt map[string]time.Time
	// runningAt: when a pod was first seen Running; finishedAt: when it
	// was first seen Succeeded or Failed.
	runningAt, finishedAt map[string]time.Time
	// nodeOf: where a pod was bound.
	nodeOf map[string]string
	// jobOf: the Job a pod belongs to; members: a Job's pods.
	jobOf   map[string]string
	members map[string][]string
	boundCh chan struct{}
	bound   int
	// nodeByUID: the node each pod was first seen bound to; rebound: the
	// pods later seen bound to another.
	nodeByUID map[types.UID]string
	rebound   []string
}

func NewPodRecorder() *PodRecorder {
	return &PodRecorder{attemptedAt: map[string]time.Time{}, createStart: map[string]time.Time{}, createdAt: map[string]time.Time{},
		boundAt: map[string]time.Time{}, runningAt: map[string]time.Time{}, finishedAt: map[string]time.Time{}, nodeOf: map[string]string{}, jobOf: map[string]string{}, members: map[string][]string{},
		boundCh: make(chan struct{}, 1), nodeByUID: map[types.UID]string{}}
}

// Start watches the namespace's pods (every namespace: "") until ctx ends
// or tb's clean-up, and returns once the watch has listed them.
func (l *PodRecorder) Start(ctx context.Context, tb ktesting.TB, client kubernetes.Interface, namespace string) error {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(namespace))
	tb.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	seen := func(obj interface{}) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		l.mu.Lock()
		now := time.Now()
		// A Job's pods are created by its controller: they exist when the
		// watch first shows them.
		if _, ok := l.createdAt[pod.Name]; !ok {
			l.createdAt[pod.Name] = now
			if job := pod.Labels[batchv1.JobNameLabel]; job != "" {
				l.jobOf[pod.Name] = job
				l.members[job] = append(l.members[job], pod.Name)
			}
		}
		if _, ok := l.runningAt[pod.Name]; !ok && pod.Status.Phase == corev1.PodRunning {
			l.runningAt[pod.Name] = now
		}
		if _, ok := l.finishedAt[pod.Name]; !ok && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
			l.finishedAt[pod.Name] = now
		}
		l.mu.Unlock()
		if pod.Spec.NodeName == "" {
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					l.mu.Lock()
					if _, ok := l.attemptedAt[pod.Name]; !ok {
						l.attemptedAt[pod.Name] = time.Now()
					}
					l.mu.Unlock()
				}
			}
			return
		}
		l.mu.Lock()
		if first, seen := l.nodeByUID[pod.UID]; !seen {
			l.nodeByUID[pod.UID] = pod.Spec.NodeName
		} else if first != pod.Spec.NodeName {
			l.rebound = append(l.rebound, fmt.Sprintf("pod %s/%s bound twice: %s, then %s", pod.Namespace, pod.Name, first, pod.Spec.NodeName))
		}
		if _, ok := l.boundAt[pod.Name]; !ok {
			l.boundAt[pod.Name] = time.Now()
			l.nodeOf[pod.Name] = pod.Spec.NodeName
			l.bound++
			select {
			case l.boundCh <- struct{}{}:
			default:
			}
		}
		l.mu.Unlock()
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, obj interface{}) { seen(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return nil
}

// Creating marks that the workload starts creating the named pod.
func (l *PodRecorder) Creating(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.firstCreate.IsZero() {
		l.firstCreate = now
	}
	l.createStart[name] = now
}

// Created marks that the named pod exists (its create call returned).
func (l *PodRecorder) Created(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, seen := l.createdAt[name]; !seen {
		l.createdAt[name] = time.Now()
	}
}

// Started marks the start of a workload whose pods a controller creates.
func (l *PodRecorder) Started() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.firstCreate.IsZero() {
		l.firstCreate = time.Now()
	}
}

// Jobs returns each Job's pods seen so far.
func (l *PodRecorder) Jobs() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string][]string, len(l.members))
	for job, pods := range l.members {
		out[job] = append([]string(nil), pods...)
	}
	return out
}

// Running counts the names bound and not yet finished.
func (l *PodRecorder) Running(names []string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, name := range names {
		_, bound := l.boundAt[name]
		_, finished := l.finishedAt[name]
		if bound && !finished {
			n++
		}
	}
	return n
}

// WaitBound waits until n pods have been seen bound.
func (l *PodRecorder) WaitBound(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		got := l.bound
		l.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-l.boundCh:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			return fmt.Errorf("%d of %d pods bound after %s", got, n, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Span is from the first pod created to the last pod bound of the names.
func (l *PodRecorder) Span(names []string) (firstCreate, lastCreated, lastBound time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	firstCreate = l.firstCreate
	for _, n := range names {
		if t, ok := l.createStart[n]; ok && t.Before(firstCreate) {
			firstCreate = t
		}
		if t := l.createdAt[n]; t.After(lastCreated) {
			lastCreated = t
		}
		if t := l.boundAt[n]; t.After(lastBound) {
			lastBound = t
		}
	}
	return firstCreate, lastCreated, lastBound
}

// WaitAttempted waits until n pods have been reported unschedulable.
func (l *PodRecorder) WaitAttempted(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		got := len(l.attemptedAt)
		l.mu.Unlock()
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods tried after %s", got, n, timeout)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// LastAttempt is when a pod was last first reported unschedulable.
func (l *PodRecorder) LastAttempt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, t := range l.attemptedAt {
		if t.After(last) {
			last = t
		}
	}
	return last
}

// CountBound counts the names seen bound.
func (l *PodRecorder) CountBound(names []string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, name := range names {
		if _, ok := l.boundAt[name]; ok {
			n++
		}
	}
	return n
}

// FirstBound is when the first of the names was seen bound.
func (l *PodRecorder) FirstBound(names []string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, n := range names {
		if t, ok := l.boundAt[n]; ok && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// Rebound lists the pods seen bound to one node and then another, each
// time it was seen: a scheduler never moves a bound pod.
func (l *PodRecorder) Rebound() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.rebound...)
}

// PodLife is what the recorder saw of one pod; a zero time is not seen.
type PodLife struct {
	Created, Bound, Running, Finished time.Time
	Node                              string
}

// Life returns what the recorder saw of the named pod.
func (l *PodRecorder) Life(name string) PodLife {
	l.mu.Lock()
	defer l.mu.Unlock()
	return PodLife{Created: l.createdAt[name], Bound: l.boundAt[name], Running: l.runningAt[name], Finished: l.finishedAt[name], Node: l.nodeOf[name]}
}

// BoundOffsets is when each pod seen bound was bound, in seconds from the
// workload's start (its first pod created, or Started), in order.
func (l *PodRecorder) BoundOffsets() []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]float64, 0, len(l.boundAt))
	for _, t := range l.boundAt {
		out = append(out, t.Sub(l.firstCreate).Seconds())
	}
	slices.Sort(out)
	return out
}
