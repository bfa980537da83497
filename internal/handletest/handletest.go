// Package handletest builds the framework handle that flotilla's unit tests
// give a plugin: the scheduler framework's own (tf.NewFramework, as the
// in-tree plugins' tests use), with a profile name and the options a test
// needs (an informer factory, an event recorder, a pod activator, a
// nominator). A test's
// fake embeds it and overrides only what it observes, so a call the test
// did not prepare for behaves as in kube-scheduler instead of panicking on
// a nil handle.
package handletest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
)

// New returns a framework of the profile with no plugins of ours (only the
// queue sort and binder every profile has), closed when the test ends.
func New(t testing.TB, profile string, opts ...frameworkruntime.Option) fwk.Handle {
	t.Helper()
	// The framework records plugin metrics; registering them is idempotent.
	schedmetrics.Register()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// The maps of pods waiting in Permit and in PreBind, which
	// kube-scheduler gives every profile; a test's options come after and
	// may replace anything.
	opts = append([]frameworkruntime.Option{
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodsInPreBind(frameworkruntime.NewPodsInPreBindMap()),
		// The scheduling queue, as the nominator of pods to nodes
		// (Preemption's nominations, the gang's plan moving them).
		frameworkruntime.WithPodNominator(internalqueue.NewTestQueue(ctx, nil)),
	}, opts...)
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, profile, opts...)
	if err != nil {
		t.Fatalf("building the framework of profile %q: %v", profile, err)
	}
	return fw
}

// Activations is a handle that records the pods a plugin activates (asks
// the scheduling queue to try again at once), by namespace/name.
type Activations struct {
	fwk.Handle
	Activated []string
}

// Activate records the pods.
func (a *Activations) Activate(_ klog.Logger, pods map[string]*corev1.Pod) {
	for key := range pods {
		a.Activated = append(a.Activated, key)
	}
}
