package cluster

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

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
