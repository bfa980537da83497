package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is flotilla's API group.
const GroupName = "scheduling.flotilla.dev"

// SchemeGroupVersion is scheduling.flotilla.dev/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// QueueResource is the queues resource of this version.
var QueueResource = SchemeGroupVersion.WithResource("queues")

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme registers the Queue types.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &Queue{}, &QueueList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
