// Package scheme makes kube-scheduler understand flotilla's plugin args.
// Importing it (the scheduler binary and the test harness do) registers the
// v1 and internal args types, their defaults and conversions, with every
// scheme the scheduler decodes or converts configuration through.
package scheme

import (
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	schedschemev1 "k8s.io/kube-scheduler/config/v1"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/flotilla-sched/flotilla/apis/config"
	configv1 "github.com/flotilla-sched/flotilla/apis/config/v1"
)

// Scheme is kube-scheduler's own configuration scheme, now holding our types.
var Scheme = kubeschedulerscheme.Scheme

func init() {
	// The decoding scheme was already built by kube-scheduler's own init, so
	// it is extended in place.
	utilruntime.Must(config.AddToScheme(Scheme))
	utilruntime.Must(configv1.AddToScheme(Scheme))
	// The args-conversion scheme is built lazily from these builders the first
	// time a configuration is converted, which is after every init has run.
	schedconfig.SchemeBuilder.Register(config.AddToScheme)
	schedschemev1.SchemeBuilder.Register(configv1.AddToScheme)
}
