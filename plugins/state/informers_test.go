package state

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// The informers the store makes keep objects without their
// managedFields, and with everything the store reads: names, UID,
// labels, annotations, spec and status.
func TestStoreInformersDropManagedFields(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{}}}`)}}}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels: map[string]string{schedv1alpha1.PodGroupLabel: "g", "role": "worker"}, Annotations: map[string]string{"batch.kubernetes.io/job-completion-index": "3"},
			ManagedFields: managed}
	}
	tests := []struct {
		name string
		obj  runtime.Object
		kind runtime.Object
	}{
		{name: "a finished member's metadata", obj: &metav1.PartialObjectMetadata{ObjectMeta: meta("worker-3")}, kind: &metav1.PartialObjectMetadata{}},
		{name: "a PodGroup", obj: &schedv1alpha1.PodGroup{ObjectMeta: meta("g"), Spec: schedv1alpha1.PodGroupSpec{MinMember: 4},
			Status: schedv1alpha1.PodGroupStatus{Phase: schedv1alpha1.PodGroupRunning, Running: 4}}, kind: &schedv1alpha1.PodGroup{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw := watch.NewFake()
			informer := cache.NewSharedIndexInformer(listThenWatch{&cache.ListWatch{
				ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
					return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
				},
				WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
			}}, tc.kind, 0, cache.Indexers{})
			withoutManagedFields(informer)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go informer.RunWithContext(ctx)
			require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced))
			want := tc.obj.DeepCopyObject()
			fw.Add(tc.obj)
			require.Eventually(t, func() bool { return len(informer.GetStore().List()) == 1 }, 5*time.Second, time.Millisecond)
			got := informer.GetStore().List()[0].(runtime.Object)
			gotMeta, wantMeta := got.(metav1.Object), want.(metav1.Object)
			assert.Empty(t, gotMeta.GetManagedFields(), "managedFields kept")
			wantMeta.SetManagedFields(nil)
			assert.Equal(t, want, got, "everything else kept")
		})
	}
}
