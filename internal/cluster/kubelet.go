package cluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// FinishTerminatingPods plays the kubelets' part in deletion until ctx
// ends: a bound pod deleted with a grace period stays terminating until
// its kubelet reports its containers stopped, and there are no kubelets
// here, so every terminating pod is removed at once.
func (cp *ControlPlane) FinishTerminatingPods(ctx context.Context) error {
	return FinishTerminatingPods(ctx, cp.tb, cp.Client)
}

// FinishTerminatingPods does the same against any cluster the client
// reaches.
func FinishTerminatingPods(ctx context.Context, tb ktesting.TB, client kubernetes.Interface) error {
	// Stopped before the apiserver, which otherwise waits a minute for the
	// watch to drain.
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	tb.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	finish := func(obj interface{}) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.DeletionTimestamp == nil {
			return
		}
		err := client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
			GracePeriodSeconds: new(int64), Preconditions: metav1.NewUIDPreconditions(string(pod.UID)),
		})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && ctx.Err() == nil {
			tb.Logf("finishing terminating pod %s/%s: %v", pod.Namespace, pod.Name, err)
		}
	}
	_, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    finish,
		UpdateFunc: func(_, obj interface{}) { finish(obj) },
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return nil
}

// CreatePriorityClass creates a PriorityClass; never makes its pods
// preemptionPolicy: Never.
func (cp *ControlPlane) CreatePriorityClass(ctx context.Context, name string, value int32, never bool) error {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if never {
		policy := corev1.PreemptNever
		pc.PreemptionPolicy = &policy
	}
	_, err := cp.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
	return err
}
