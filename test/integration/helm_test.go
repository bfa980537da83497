package integration

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/manifests/chart"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// The chart, as a user runs it through Helm against an apiserver with the
// RBAC authorizer and no CRDs: install brings both CRDs to Established and
// creates every object it renders and the Queues of its values; the
// scheduler, run with the installed configuration and flags as the
// installed ServiceAccount, schedules gangs, queues, preemption, DRA claims
// and serves /metrics without one refused request, beside kube-scheduler
// and, after helm upgrade, instead of it; an upgrade with a changed CRD
// schema updates the CRD; bad values fail at install naming the value;
// helm uninstall keeps the CRDs and the users' Queues.
func TestHelmChartInstallsUpgradesAndSchedules(t *testing.T) {
	ca, err := cluster.NewClientCA(t.TempDir())
	require.NoError(t, err)
	h := harness.Start(t, cluster.ControlPlaneOptions{NoCRDs: true, ExtraAPIServerFlags: []string{
		"--authorization-mode=RBAC", "--client-ca-file=" + ca.CertFile,
	}})
	ch, err := chart.Load()
	require.NoError(t, err)
	queues := []any{map[string]any{"name": "research", "weight": 2, "capability": map[string]any{"nvidia.com/gpu": "8"}}}

	t.Run("bad values fail at install naming the value", func(t *testing.T) {
		for _, c := range []struct {
			values map[string]any
			want   string
		}{
			{map[string]any{"mode": "instead"}, "/mode"},
			{map[string]any{"binpack": map[string]any{"resources": []any{map[string]any{"name": "cpu", "weight": -1}}}}, "/binpack/resources/0/weight"},
			{map[string]any{"queues": []any{map[string]any{"name": "q", "weight": -3}}}, "/queues/0/weight"},
			{map[string]any{"gang": map[string]any{"permitWaitingTimeSeconds": 0}}, "/gang/permitWaitingTimeSeconds"},
		} {
			install := newHelmInstall(newHelmConfig(t, h))
			_, err := install.RunWithContext(h.Ctx, ch, c.values)
			require.Error(t, err, "values %v", c.values)
			require.Contains(t, err.Error(), c.want, "the error names the bad value")
		}
		// Nothing was made.
		_, err := h.Client.AppsV1().Deployments(chart.Namespace).Get(h.Ctx, "flotilla-scheduler", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "a refused install made its Deployment: %v", err)
	})

	w := (*rbacWorld)(nil)
	t.Run("install beside kube-scheduler", func(t *testing.T) {
		install := newHelmInstall(newHelmConfig(t, h))
		// The dashboards are ConfigMaps; the ServiceMonitor and the
		// PrometheusRule need the Prometheus Operator's CRDs.
		values := map[string]any{"queues": queues, "dashboards": map[string]any{"enabled": true}}
		rel, err := install.RunWithContext(h.Ctx, ch, values)
		require.NoError(t, err)
		requireCRDsEstablished(t, h)
		rendered, err := chart.Render(values)
		require.NoError(t, err)
		requireObjectsExist(t, h, rendered.Documents())
		// The install that creates the Queue CRD cannot create Queues, and
		// its notes say how they will be.
		notes := rel.(*releasev1.Release).Info.Notes
		require.Contains(t, notes, "helm upgrade flotilla <chart> -n flotilla-system --reuse-values", "notes:\n%s", notes)
		_, err = h.Dynamic.Resource(queuesResource).Get(h.Ctx, "research", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "a Queue before its CRD: %v", err)

		w = newRBACWorld(t, h, ca)
		w.lease = types.NamespacedName{Namespace: chart.Namespace, Name: "flotilla-scheduler"}
		failed, logs := w.runSteps(t, installedConfig(t, h), serviceAccountKubeconfig(t, h), installedFlags(t, h), "")
		require.Empty(t, failed, "scheduler logs:\n%s", logs)
		requireNoneRefused(t, logs)
	})

	t.Run("tenants get PodGroups and Queues through view and edit", func(t *testing.T) {
		require.NotNil(t, w, "the install failed")
		require.NoError(t, h.StartControllers(h.Ctx, t, "clusterrole-aggregation-controller"))
		_, err := h.Client.CoreV1().Namespaces().Create(h.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		for user, role := range map[string]string{"viewer": "view", "editor": "edit"} {
			_, err := h.Client.RbacV1().RoleBindings("team").Create(h.Ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: user},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		// Queues are cluster-scoped: read through a ClusterRoleBinding to view.
		_, err = h.Client.RbacV1().ClusterRoleBindings().Create(h.Ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "viewer"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "viewer"}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		as := func(user string) dynamic.Interface {
			cfg := rest.CopyConfig(h.Config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
			return dynamic.NewForConfigOrDie(cfg)
		}
		podGroups := schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
		pg := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
			"metadata": map[string]any{"name": "train"}, "spec": map[string]any{"minMember": int64(2)},
		}}
		// The aggregation controller copies the chart's rules into view and
		// edit in a moment, each role on its own: that edit has them says
		// nothing of view.
		granted := func(what string, try func(ctx context.Context) error) {
			t.Helper()
			var last error
			require.NoError(t, wait.PollUntilContextTimeout(h.Ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				last = try(ctx)
				return last == nil, nil
			}), "%s: %v", what, last)
		}
		granted("a user with edit in the namespace creates a PodGroup", func(ctx context.Context) error {
			_, err := as("editor").Resource(podGroups).Namespace("team").Create(ctx, pg, metav1.CreateOptions{})
			return err
		})
		granted("a user with view in the namespace reads its PodGroups", func(ctx context.Context) error {
			_, err := as("viewer").Resource(podGroups).Namespace("team").Get(ctx, "train", metav1.GetOptions{})
			return err
		})
		granted("a user with view reads the Queues", func(ctx context.Context) error {
			_, err := as("viewer").Resource(queuesResource).List(ctx, metav1.ListOptions{})
			return err
		})
		pg.SetName("other")
		_, err = as("viewer").Resource(podGroups).Namespace("team").Create(h.Ctx, pg, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "a viewer created a PodGroup: %v", err)
		_, err = as("editor").Resource(queuesResource).List(h.Ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "edit in one namespace reads cluster-scoped Queues: %v", err)
	})

	t.Run("upgrade to instead of kube-scheduler", func(t *testing.T) {
		require.NotNil(t, w, "the install failed")
		upgrade := newHelmUpgrade(newHelmConfig(t, h))
		_, err := upgrade.RunWithContext(h.Ctx, chart.Name, ch, map[string]any{"mode": chart.ReplaceDefault, "queues": queues})
		require.NoError(t, err)
		rendered, err := chart.Render(map[string]any{"mode": chart.ReplaceDefault, "queues": queues}, queueAPI)
		require.NoError(t, err)
		requireObjectsExist(t, h, rendered.Documents())
		q := &flotillav1alpha1.Queue{}
		requireGet(t, h, queuesResource, "", "research", q)
		require.Equal(t, int32(2), q.Spec.Weight)
		// The lease of its own is no longer granted.
		_, err = h.Client.RbacV1().Roles(chart.Namespace).Get(h.Ctx, "flotilla-scheduler-leader-election", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "beside-default's lease Role survived the upgrade: %v", err)

		w.lease = types.NamespacedName{Namespace: "kube-system", Name: "kube-scheduler"}
		w.servesDefault = true
		failed, logs := w.runSteps(t, installedConfig(t, h), serviceAccountKubeconfig(t, h), installedFlags(t, h), "")
		require.Empty(t, failed, "scheduler logs:\n%s", logs)
		requireNoneRefused(t, logs)
	})

	t.Run("upgrade with a changed CRD schema updates the CRD", func(t *testing.T) {
		changed := withTemplate(t, ch, chart.CRDTemplatePath("scheduling.flotilla.dev_queues.yaml"), func(tpl []byte) []byte {
			const was = "description: Weight is the queue's share relative to its siblings."
			require.Contains(t, string(tpl), was)
			return bytes.Replace(tpl, []byte(was), []byte("description: Weight, changed by a chart upgrade."), 1)
		})
		upgrade := newHelmUpgrade(newHelmConfig(t, h))
		_, err := upgrade.RunWithContext(h.Ctx, chart.Name, changed, map[string]any{"queues": queues})
		require.NoError(t, err)
		crd, err := apiextensionsclient.NewForConfigOrDie(h.Config).ApiextensionsV1().CustomResourceDefinitions().Get(h.Ctx, "queues.scheduling.flotilla.dev", metav1.GetOptions{})
		require.NoError(t, err)
		weight := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["weight"]
		require.Equal(t, "Weight, changed by a chart upgrade.", weight.Description)
	})

	t.Run("uninstall keeps the CRDs and the Queues", func(t *testing.T) {
		uninstall := action.NewUninstall(newHelmConfig(t, h))
		uninstall.WaitStrategy = kube.HookOnlyStrategy
		_, err := uninstall.Run(chart.Name)
		require.NoError(t, err)
		require.NoError(t, wait.PollUntilContextTimeout(h.Ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := h.Client.AppsV1().Deployments(chart.Namespace).Get(ctx, "flotilla-scheduler", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}), "the Deployment outlived helm uninstall")
		requireCRDsEstablished(t, h)
		requireGet(t, h, queuesResource, "", "research", &flotillav1alpha1.Queue{})
	})

	// A platform team's umbrella chart: flotilla as a subchart, given the
	// global values Helm passes every subchart, its image pinned by digest.
	t.Run("as a subchart with global values, pinned by digest", func(t *testing.T) {
		digest := "sha256:" + strings.Repeat("5e", 32)
		parent := &chartv2.Chart{
			Metadata: &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "platform", Version: "0.1.0",
				Dependencies: []*chartv2.Dependency{{Name: chart.Name, Version: ch.Metadata.Version}}},
			Values: map[string]any{},
		}
		parent.SetDependencies(ch)
		install := newHelmInstall(newHelmConfig(t, h))
		install.ReleaseName = "platform"
		// The CRDs the first release kept stay its own.
		_, err := install.RunWithContext(h.Ctx, parent, map[string]any{
			"global": map[string]any{"imageRegistry": "registry.example.com", "storageClass": "fast"},
			chart.Name: map[string]any{
				"image": map[string]any{"repository": "registry.example.com/flotilla-scheduler", "digest": digest},
				"crds":  map[string]any{"install": false},
			},
		})
		require.NoError(t, err)
		deployment, err := h.Client.AppsV1().Deployments(chart.Namespace).Get(h.Ctx, "flotilla-scheduler", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "registry.example.com/flotilla-scheduler@"+digest, deployment.Spec.Template.Spec.Containers[0].Image)
		pdb, err := h.Client.PolicyV1().PodDisruptionBudgets(chart.Namespace).Get(h.Ctx, "flotilla-scheduler", metav1.GetOptions{})
		require.NoError(t, err, "two replicas come with a PodDisruptionBudget")
		require.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue())
		selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		require.NoError(t, err)
		require.True(t, selector.Matches(labels.Set(deployment.Spec.Template.Labels)), "the budget covers the Deployment's pods")
		uninstall := action.NewUninstall(newHelmConfig(t, h))
		uninstall.WaitStrategy = kube.HookOnlyStrategy
		_, err = uninstall.Run("platform")
		require.NoError(t, err)
	})
}

// newHelmConfig is Helm's action configuration against the harness's
// apiserver as its admin, releases stored as Secrets in the chart's
// namespace (Helm's default driver), for one action: as a helm command,
// it discovers the APIs the cluster serves when it starts.
func newHelmConfig(t *testing.T, h *harness.Harness) *action.Configuration {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &h.KubeconfigPath
	namespace := chart.Namespace
	flags.Namespace = &namespace
	cfg := action.NewConfiguration()
	require.NoError(t, cfg.Init(flags, chart.Namespace, "secret"))
	// The in-process apiserver is built without a version (it reports
	// v0.0.0-master), so Helm's check of the chart's kubeVersion is told
	// the version its code is, the module's k8s.io/kubernetes; the APIs
	// are the cluster's.
	kube, err := common.ParseKubeVersion(chart.KubeVersion)
	require.NoError(t, err)
	apis, err := action.GetVersionSet(h.Client.Discovery())
	require.NoError(t, err)
	cfg.Capabilities = common.DefaultCapabilities.Copy()
	cfg.Capabilities.KubeVersion = *kube
	cfg.Capabilities.APIVersions = apis
	return cfg
}

// newHelmInstall is `helm install flotilla -n flotilla-system
// --create-namespace`, the README's command.
func newHelmInstall(cfg *action.Configuration) *action.Install {
	install := action.NewInstall(cfg)
	install.ReleaseName = chart.Name
	install.Namespace = chart.Namespace
	install.CreateNamespace = true
	install.WaitStrategy = kube.HookOnlyStrategy
	install.Timeout = time.Minute
	return install
}

// newHelmUpgrade is `helm upgrade flotilla -n flotilla-system`.
func newHelmUpgrade(cfg *action.Configuration) *action.Upgrade {
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = chart.Namespace
	upgrade.WaitStrategy = kube.HookOnlyStrategy
	upgrade.Timeout = time.Minute
	return upgrade
}

// withTemplate is the chart with one template's text changed.
func withTemplate(t *testing.T, ch *chartv2.Chart, path string, change func([]byte) []byte) *chartv2.Chart {
	t.Helper()
	copied := *ch
	copied.Templates = nil
	found := false
	for _, f := range ch.Templates {
		c := *f
		if c.Name == path {
			c.Data = change(c.Data)
			found = true
		}
		copied.Templates = append(copied.Templates, &c)
	}
	require.True(t, found, "the chart has no template %s", path)
	return &copied
}

func requireCRDsEstablished(t *testing.T, h *harness.Harness) {
	t.Helper()
	requireEstablished(t, h, "podgroups.scheduling.x-k8s.io", "queues.scheduling.flotilla.dev")
}

// requireEstablished waits until each named CRD is Established.
func requireEstablished(t *testing.T, h *harness.Harness, names ...string) {
	t.Helper()
	client := apiextensionsclient.NewForConfigOrDie(h.Config)
	for _, name := range names {
		require.NoError(t, wait.PollUntilContextTimeout(h.Ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		}), "CRD %s is not Established", name)
	}
}

// requireObjectsExist checks that every rendered object is in the cluster.
func requireObjectsExist(t *testing.T, h *harness.Harness, docs []string) {
	t.Helper()
	groups, err := restmapper.GetAPIGroupResources(h.Client.Discovery())
	require.NoError(t, err)
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj.Object), doc)
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s %s", gvk, obj.GetName())
		namespace := obj.GetNamespace()
		if mapping.Scope.Name() == "namespace" && namespace == "" {
			namespace = chart.Namespace
		}
		_, err = h.Dynamic.Resource(mapping.Resource).Namespace(namespace).Get(h.Ctx, obj.GetName(), metav1.GetOptions{})
		require.NoError(t, err, "%s %s/%s was rendered but is not in the cluster", gvk.Kind, namespace, obj.GetName())
	}
}

// queuesResource is the Queue API, and queueAPI how Helm names it among
// the cluster's APIs.
var queuesResource = schema.GroupVersionResource{Group: "scheduling.flotilla.dev", Version: "v1alpha1", Resource: "queues"}

const queueAPI = "scheduling.flotilla.dev/v1alpha1/Queue"

func requireGet(t *testing.T, h *harness.Harness, resource schema.GroupVersionResource, namespace, name string, into any) {
	t.Helper()
	u, err := h.Dynamic.Resource(resource).Namespace(namespace).Get(h.Ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "%s %s", resource, name)
	data, err := u.MarshalJSON()
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(data, into))
}

// installedConfig is the scheduler configuration in the installed
// ConfigMap.
func installedConfig(t *testing.T, h *harness.Harness) []byte {
	t.Helper()
	cm, err := h.Client.CoreV1().ConfigMaps(chart.Namespace).Get(h.Ctx, "flotilla-scheduler-config", metav1.GetOptions{})
	require.NoError(t, err)
	config, ok := cm.Data["scheduler-config.yaml"]
	require.True(t, ok, "the ConfigMap has no scheduler-config.yaml")
	return []byte(config)
}

// installedFlags are the installed Deployment's scheduler flags besides
// --config.
func installedFlags(t *testing.T, h *harness.Harness) []string {
	t.Helper()
	d, err := h.Client.AppsV1().Deployments(chart.Namespace).Get(h.Ctx, "flotilla-scheduler", metav1.GetOptions{})
	require.NoError(t, err)
	flags, err := manifests.FlagsOf(d)
	require.NoError(t, err)
	return flags
}

// serviceAccountKubeconfig is a kubeconfig of the installed
// ServiceAccount.
func serviceAccountKubeconfig(t *testing.T, h *harness.Harness) string {
	t.Helper()
	kubeconfig, err := h.ServiceAccountKubeconfig(h.Ctx, chart.Namespace, "flotilla-scheduler")
	require.NoError(t, err)
	return kubeconfig
}
