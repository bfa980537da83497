package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
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
	objs, err := decodeAll(data)
	if err != nil {
		return nil, err
	}
	return cp.create(ctx, objs, opts)
}

// decodeAll reads every object of a multi-document YAML stream.
func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// create creates the objects in order; those that exist already are left
// as they are.
func (cp *ControlPlane) create(ctx context.Context, objs []*unstructured.Unstructured, opts metav1.CreateOptions) ([]*unstructured.Unstructured, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	var created []*unstructured.Unstructured
	for _, obj := range objs {
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
	return created, nil
}

// ApplyAfterAnnotation on an example object delays its creation by that
// many seconds after the first wave (ApplyExamples): work that arrives
// while other work runs, as it does on a shared cluster. kubectl apply
// ignores it.
const ApplyAfterAnnotation = "playground.flotilla.dev/apply-after-seconds"

// ApplyExamples creates every object in manifests/examples (and in the
// further directories under manifests/ given, e.g. examples/native), in
// waves: objects without ApplyAfterAnnotation at once, file by file in
// name order, the others that many seconds later. It returns when the last
// wave is created; wave, if not nil, hears of each wave as it starts.
func ApplyExamples(ctx context.Context, cp *ControlPlane, wave func(after time.Duration, objs []*unstructured.Unstructured), dirs ...string) ([]*unstructured.Unstructured, error) {
	start := time.Now()
	waves := map[time.Duration][]*unstructured.Unstructured{}
	for _, dir := range append([]string{"examples"}, dirs...) {
		if err := addWaves(waves, dir); err != nil {
			return nil, err
		}
	}
	var all []*unstructured.Unstructured
	for _, after := range slices.Sorted(maps.Keys(waves)) {
		select {
		case <-ctx.Done():
			return all, ctx.Err()
		case <-time.After(time.Until(start.Add(after))):
		}
		if wave != nil {
			wave(after, waves[after])
		}
		created, err := cp.create(ctx, waves[after], metav1.CreateOptions{})
		all = append(all, created...)
		if err != nil {
			return all, fmt.Errorf("manifests/examples (wave at %s): %w", after, err)
		}
	}
	return all, nil
}

// addWaves adds the objects of every file of manifests/<dir> to the wave
// their ApplyAfterAnnotation names.
func addWaves(waves map[time.Duration][]*unstructured.Unstructured, dir string) error {
	docs, names, err := manifests.Dir(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		objs, err := decodeAll(docs[name])
		if err != nil {
			return fmt.Errorf("manifests/%s/%s: %w", dir, name, err)
		}
		for _, obj := range objs {
			var after time.Duration
			if v, ok := obj.GetAnnotations()[ApplyAfterAnnotation]; ok {
				seconds, err := strconv.ParseFloat(v, 64)
				if err != nil || seconds < 0 {
					return fmt.Errorf("manifests/%s/%s: %s %s: annotation %s is %q, not a number of seconds", dir, name, obj.GetKind(), obj.GetName(), ApplyAfterAnnotation, v)
				}
				after = time.Duration(seconds * float64(time.Second))
			}
			waves[after] = append(waves[after], obj)
		}
	}
	return nil
}
