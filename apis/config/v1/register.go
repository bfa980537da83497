package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
)

// SchemeGroupVersion is kubescheduler.config.k8s.io/v1: the scheduler decodes
// the args of a plugin named X as kind XArgs of this version.
var SchemeGroupVersion = schema.GroupVersion{Group: schedconfig.GroupName, Version: "v1"}

// AddToScheme registers the v1 args types with their defaults and conversions.
var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, addDefaultingFuncs, addConversionFuncs)
	AddToScheme   = schemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&BinpackArgs{},
		&GangArgs{},
		&ProportionArgs{},
	)
	return nil
}

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	scheme.AddTypeDefaultingFunc(&BinpackArgs{}, func(obj interface{}) { SetDefaults_BinpackArgs(obj.(*BinpackArgs)) })
	scheme.AddTypeDefaultingFunc(&GangArgs{}, func(obj interface{}) { SetDefaults_GangArgs(obj.(*GangArgs)) })
	scheme.AddTypeDefaultingFunc(&ProportionArgs{}, func(obj interface{}) { SetDefaults_ProportionArgs(obj.(*ProportionArgs)) })
	return nil
}
