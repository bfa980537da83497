// Package v1 holds the versioned form of flotilla's plugin arguments as users
// write them under `pluginConfig[].args` in a KubeSchedulerConfiguration of
// `kubescheduler.config.k8s.io/v1`. Optional fields are pointers so that
// defaulting can tell "unset" from "set to zero".
//
// +kubebuilder:object:generate=true
package v1
