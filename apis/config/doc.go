// Package config holds the internal (hub) form of every flotilla plugin's
// arguments. The scheduler decodes `pluginConfig[].args` into the versioned
// types of package v1, defaults them there, and converts them to these types
// before a plugin's factory sees them; plugins only ever read this form.
//
// +kubebuilder:object:generate=true
package config
