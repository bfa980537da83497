// Package v1alpha1 is flotilla's scheduling API, scheduling.flotilla.dev:
// the cluster-scoped Queue.
//
// +kubebuilder:object:generate=true
// +groupName=scheduling.flotilla.dev
package v1alpha1
