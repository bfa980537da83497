package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/flotilla-sched/flotilla/manifests"
)

func installCRDs(ctx context.Context, client apiextensionsclient.Interface, crds []*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range crds {
		_, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established: %w", crd.Name, err)
		}
	}
	return nil
}

// Apply creates every object of a multi-document YAML stream, as
// `kubectl create -f` would; objects that already exist are left as they are.
// Namespaced objects without a namespace go to "default".
func (cp *ControlPlane) Apply(ctx context.Context, data []byte) ([]*unstructured.Unstructured, error) {
	return cp.apply(ctx, data, metav1.CreateOptions{})
}

// DryRun submits every object of a YAML stream with server-side dry-run, as
// `kubectl apply --dry-run=server` does: the apiserver validates and admits
// each object without storing it.
func (cp *ControlPlane) DryRun(ctx context.Context, data []byte) ([]*unstructured.Unstructured, error) {
	return cp.apply(ctx, data, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
}

func (cp *ControlPlane) apply(ctx context.Context, data []byte, opts metav1.CreateOptions) ([]*unstructured.Unstructured, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var created []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return created, nil
			}
			return created, err
		}
		if len(obj.Object) == 0 {
			continue
		}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return created, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		resource := cp.Dynamic.Resource(mapping.Resource)
		var out *unstructured.Unstructured
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				obj.SetNamespace(metav1.NamespaceDefault)
			}
			out, err = resource.Namespace(obj.GetNamespace()).Create(ctx, obj, opts)
		} else {
			out, err = resource.Create(ctx, obj, opts)
		}
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return created, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		created = append(created, out)
	}
}

// ApplyExamples creates every object in manifests/examples.
func ApplyExamples(ctx context.Context, cp *ControlPlane) ([]*unstructured.Unstructured, error) {
	docs, names, err := manifests.Dir("examples")
	if err != nil {
		return nil, err
	}
	var all []*unstructured.Unstructured
	for _, name := range names {
		created, err := cp.Apply(ctx, docs[name])
		all = append(all, created...)
		if err != nil {
			return all, fmt.Errorf("manifests/examples/%s: %w", name, err)
		}
	}
	return all, nil
}
