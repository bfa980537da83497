package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/plugins/gang"
	"github.com/flotilla-sched/flotilla/test/harness"
)

// The steps a scheduler deployed with manifests/rbac.yaml goes through, in
// the order it goes through them. Each is what some grant of the manifest
// is needed for (neededBy).
const (
	stepCachesSync      = "its caches sync (every informer can list and watch)"
	stepLease           = "it acquires its leader-election lease"
	stepUnschedulable   = "an unschedulable pod is told why (PodScheduled=False)"
	stepBind            = "a pod is bound"
	stepEvent           = "a Scheduled event is recorded"
	stepGangStatus      = "a gang's PodGroup status is published"
	stepGangWaiting     = "a waiting gang's PodGroup says why, and stops once it is placed"
	stepQueueStatus     = "a Queue's status is published"
	stepPreempt         = "a lower-priority pod is evicted for a higher-priority one"
	stepClaimAllocated  = "a pod's ResourceClaim is allocated"
	stepExtendedClaim   = "a pod asking for a DRA-backed extended resource gets a claim"
	stepMetricsToken    = "Prometheus reads /metrics with a ServiceAccount token"
	stepMetricsClientCA = "Prometheus reads /metrics with a client certificate"
)

// neededBy names, for each grant of the shipped RBAC (one rule of a
// role, or a binding to a role the manifest does not define), the first
// step that fails without it. A grant missing here fails the test: give it
// a step that needs it, or drop it.
var neededBy = map[string]string{
	"ClusterRole flotilla-scheduler: events [create patch]":                                                            stepEvent,
	"ClusterRole flotilla-scheduler: nodes [get list watch]":                                                           stepCachesSync,
	"ClusterRole flotilla-scheduler: pods [get list watch]":                                                            stepCachesSync,
	"ClusterRole flotilla-scheduler: pods [delete]":                                                                    stepPreempt,
	"ClusterRole flotilla-scheduler: pods/binding [create]":                                                            stepBind,
	"ClusterRole flotilla-scheduler: pods/status [patch]":                                                              stepUnschedulable,
	"ClusterRole flotilla-scheduler: services,replicationcontrollers [get list watch]":                                 stepCachesSync,
	"ClusterRole flotilla-scheduler: replicasets,statefulsets [get list watch]":                                        stepCachesSync,
	"ClusterRole flotilla-scheduler: poddisruptionbudgets [get list watch]":                                            stepCachesSync,
	"ClusterRole flotilla-scheduler: persistentvolumeclaims,persistentvolumes [get list watch update]":                 stepCachesSync,
	"ClusterRole flotilla-scheduler: storageclasses,csinodes,csidrivers,csistoragecapacities [get list watch]":         stepCachesSync,
	"ClusterRole flotilla-scheduler: volumeattachments [get list watch]":                                               stepCachesSync,
	"ClusterRole flotilla-scheduler: namespaces [get list watch]":                                                      stepCachesSync,
	"ClusterRole flotilla-scheduler: deviceclasses,resourceslices,devicetaintrules [get list watch]":                   stepCachesSync,
	"ClusterRole flotilla-scheduler: resourceclaims [get list watch update]":                                           stepCachesSync,
	"ClusterRole flotilla-scheduler: resourceclaimtemplates [get list watch]":                                          stepCachesSync,
	"ClusterRole flotilla-scheduler: resourceclaims/status [update patch]":                                             stepClaimAllocated,
	"ClusterRole flotilla-scheduler: resourceclaims/binding [update patch]":                                            stepClaimAllocated,
	"ClusterRole flotilla-scheduler: resourceclaims [create delete]":                                                   stepExtendedClaim,
	"ClusterRole flotilla-scheduler: podgroups [get list watch]":                                                       stepCachesSync,
	"ClusterRole flotilla-scheduler: podgroups/status [patch]":                                                         stepGangStatus,
	"ClusterRole flotilla-scheduler: podgroups [patch]":                                                                stepGangWaiting,
	"ClusterRole flotilla-scheduler: queues [get list watch]":                                                          stepCachesSync,
	"ClusterRole flotilla-scheduler: queues/status [patch]":                                                            stepQueueStatus,
	"ClusterRole flotilla-scheduler: tokenreviews [create]":                                                            stepMetricsToken,
	"ClusterRole flotilla-scheduler: subjectaccessreviews [create]":                                                    stepMetricsToken,
	"Role flotilla-system/flotilla-scheduler-leader-election: leases [create]":                                         stepLease,
	"Role flotilla-system/flotilla-scheduler-leader-election: leases/flotilla-scheduler [get update]":                  stepLease,
	"RoleBinding kube-system/flotilla-scheduler-authentication-reader: Role extension-apiserver-authentication-reader": stepMetricsClientCA,
	"Role kube-system/flotilla-scheduler-replace-default: leases [create]":                                             stepLease,
	"Role kube-system/flotilla-scheduler-replace-default: leases/kube-scheduler [get update]":                          stepLease,
}

const (
	// stepTimeout bounds a step that must pass; each takes about a second.
	stepTimeout = 30 * time.Second
	// deniedWindow is how long a step that should fail is given anyway.
	deniedWindow = 4 * time.Second
)

// The scheduler runs as its ServiceAccount, with exactly the shipped RBAC,
// against an apiserver with the RBAC authorizer: every step of scheduling
// gangs, queues, preemption, DRA and metrics works, without one forbidden
// request. Then each grant is removed in turn, the scheduler restarted, and
// the step that needs it must be the first to fail, with a forbidden
// request for the grant's resources in the scheduler's log. Both ways to
// deploy are run: beside kube-scheduler (rbac.yaml) and instead of it
// (rbac.yaml plus rbac-replace-default.yaml, kube-scheduler's own lease).
func TestShippedRBACIsNeededRuleByRule(t *testing.T) {
	ca, err := cluster.NewClientCA(t.TempDir())
	require.NoError(t, err)
	h := harness.Start(t, cluster.ControlPlaneOptions{ExtraAPIServerFlags: []string{
		"--authorization-mode=RBAC", "--client-ca-file=" + ca.CertFile,
	}})
	for _, name := range []string{"namespace.yaml", "rbac.yaml"} {
		data, err := manifests.File(name)
		require.NoError(t, err)
		_, err = h.Apply(h.Ctx, data)
		require.NoError(t, err, name)
	}
	w := newRBACWorld(t, h, ca)
	kubeconfig, err := h.ServiceAccountKubeconfig(h.Ctx, "flotilla-system", "flotilla-scheduler")
	require.NoError(t, err)
	shipped, err := manifests.SchedulerFlags()
	require.NoError(t, err)

	schedule := func(t *testing.T, config []byte, expectFailing string) (failed string, logs string) {
		return w.runSteps(t, config, kubeconfig, shipped, expectFailing)
	}
	// check runs every step with all grants, then without each grant of
	// the manifest.
	check := func(t *testing.T, config []byte, manifest string) {
		grants, err := rbacGrants(h.Ctx, h.Client, manifest)
		require.NoError(t, err)
		for _, g := range grants {
			require.Contains(t, neededBy, g.name, "no step is named as needing this grant of manifests/%s: add one, or drop the grant", manifest)
		}
		t.Run("all grants", func(t *testing.T) {
			failed, logs := schedule(t, config, "")
			require.Empty(t, failed, "scheduler logs:\n%s", logs)
			requireNoneRefused(t, logs)
		})
		for _, g := range grants {
			t.Run("without "+g.name, func(t *testing.T) {
				want := neededBy[g.name]
				require.NoError(t, g.revoke(h.Ctx))
				defer func() { require.NoError(t, g.restore(h.Ctx)) }()
				failed, logs := schedule(t, config, want)
				require.Equal(t, want, failed, "first step to fail without %s; scheduler logs:\n%s", g.name, logs)
				require.True(t, deniedIn(logs, g.resources), "no forbidden request for %v in the scheduler's logs:\n%s", g.resources, logs)
			})
		}
	}

	t.Run("beside kube-scheduler", func(t *testing.T) {
		w.lease = types.NamespacedName{Namespace: "flotilla-system", Name: "flotilla-scheduler"}
		check(t, shippedConfig(t, "scheduler-config.yaml"), "rbac.yaml")
	})
	t.Run("instead of kube-scheduler", func(t *testing.T) {
		data, err := manifests.File("rbac-replace-default.yaml")
		require.NoError(t, err)
		_, err = h.Apply(h.Ctx, data)
		require.NoError(t, err)
		w.lease = types.NamespacedName{Namespace: "kube-system", Name: "kube-scheduler"}
		w.servesDefault = true
		// rbac.yaml's grants were checked above; what this way adds is the
		// lease, and the default profile's pods.
		check(t, shippedConfig(t, "scheduler-config-replace-default.yaml"), "rbac-replace-default.yaml")
	})
}

// deniedIn reports whether a log line shows a request refused for one of
// the resources.
func deniedIn(logs string, resources []string) bool {
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, "forbidden") {
			continue
		}
		for _, r := range resources {
			if strings.Contains(line, `resource \"`+r+`\"`) || strings.Contains(line, `resource "`+r+`"`) {
				return true
			}
		}
	}
	return false
}

// grant is one rule of a role in manifests/rbac.yaml, or a binding of the
// ServiceAccount to a role defined elsewhere; revoke takes it away from the
// live cluster and restore gives it back.
type grant struct {
	name            string
	resources       []string
	revoke, restore func(context.Context) error
}

func rbacGrants(ctx context.Context, client kubernetes.Interface, manifest string) ([]grant, error) {
	data, err := manifests.File(manifest)
	if err != nil {
		return nil, err
	}
	defined := map[string]bool{}
	var grants []grant
	var bindings []*rbacv1.RoleBinding
	// ruleGrants makes each rule of a role a grant; setRules writes the
	// role's rules to the cluster.
	ruleGrants := func(label string, rules []rbacv1.PolicyRule, setRules func(context.Context, []byte) error) {
		write := func(rules []rbacv1.PolicyRule) func(context.Context) error {
			return func(ctx context.Context) error {
				patch, err := json.Marshal(map[string]interface{}{"rules": rules})
				if err != nil {
					return err
				}
				return setRules(ctx, patch)
			}
		}
		for i, rule := range rules {
			grants = append(grants, grant{
				name: label + ": " + ruleName(rule), resources: rule.Resources,
				revoke: write(slices.Delete(slices.Clone(rules), i, i+1)), restore: write(rules),
			})
		}
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc map[string]interface{}
		if err := decoder.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		switch doc["kind"] {
		case "ClusterRole":
			role := &rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(doc, role); err != nil {
				return nil, err
			}
			defined["ClusterRole/"+role.Name] = true
			ruleGrants("ClusterRole "+role.Name, role.Rules, func(ctx context.Context, patch []byte) error {
				_, err := client.RbacV1().ClusterRoles().Patch(ctx, role.Name, types.MergePatchType, patch, metav1.PatchOptions{})
				return err
			})
		case "Role":
			role := &rbacv1.Role{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(doc, role); err != nil {
				return nil, err
			}
			defined["Role/"+role.Name] = true
			ruleGrants("Role "+role.Namespace+"/"+role.Name, role.Rules, func(ctx context.Context, patch []byte) error {
				_, err := client.RbacV1().Roles(role.Namespace).Patch(ctx, role.Name, types.MergePatchType, patch, metav1.PatchOptions{})
				return err
			})
		case "RoleBinding":
			binding := &rbacv1.RoleBinding{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(doc, binding); err != nil {
				return nil, err
			}
			bindings = append(bindings, binding)
		}
	}
	for _, binding := range bindings {
		if defined[binding.RoleRef.Kind+"/"+binding.RoleRef.Name] {
			continue
		}
		// Bound to a role the cluster provides: the grant is the binding.
		api := client.RbacV1().RoleBindings(binding.Namespace)
		var resources []string
		if binding.RoleRef.Kind == "Role" {
			role, err := client.RbacV1().Roles(binding.Namespace).Get(ctx, binding.RoleRef.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			for _, rule := range role.Rules {
				resources = append(resources, rule.Resources...)
			}
		}
		grants = append(grants, grant{
			name:      "RoleBinding " + binding.Namespace + "/" + binding.Name + ": " + binding.RoleRef.Kind + " " + binding.RoleRef.Name,
			resources: resources,
			revoke: func(ctx context.Context) error {
				return api.Delete(ctx, binding.Name, metav1.DeleteOptions{})
			},
			restore: func(ctx context.Context) error {
				_, err := api.Create(ctx, binding.DeepCopy(), metav1.CreateOptions{})
				return err
			},
		})
	}
	return grants, nil
}

func ruleName(rule rbacv1.PolicyRule) string {
	resources := slices.Clone(rule.Resources)
	if len(rule.ResourceNames) > 0 {
		for i := range resources {
			resources[i] += "/" + strings.Join(rule.ResourceNames, ",")
		}
	}
	return strings.Join(resources, ",") + " [" + strings.Join(rule.Verbs, " ") + "]"
}

// rbacWorld is the cluster the steps run in, set up once by an admin.
type rbacWorld struct {
	h    *harness.Harness
	port int
	// lease is the scheduler's leader-election lease.
	lease types.NamespacedName
	// servesDefault: the scheduler serves the default-scheduler profile too.
	servesDefault bool
	token         string
	clientCert    tls.Certificate
	// run numbers the scheduler runs, so each run's objects are its own.
	run int
}

// runSteps starts a fresh scheduler with the configuration and flags,
// as the identity of kubeconfig, and walks the steps until the first that
// fails (given only deniedWindow if it is expected to), and returns its
// name, or "" when all passed, and the scheduler's logs.
func (w *rbacWorld) runSteps(t *testing.T, config []byte, kubeconfig string, shipped []string, expectFailing string) (failed string, logs string) {
	h := w.h
	w.run++
	w.reset(t)
	port, err := cluster.FreePort()
	require.NoError(t, err)
	// In a pod, delegated authentication and authorization of /metrics
	// callers fall back to the in-cluster ServiceAccount; out of a pod
	// they are pointed at the same credentials.
	flags := append(append([]string{}, shipped...), "--secure-port="+strconv.Itoa(port),
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig)
	p, err := h.StartSchedulerProcessAs(h.Ctx, config, kubeconfig, flags...)
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Kill()) }()
	w.port = port
	for _, s := range w.steps() {
		timeout := stepTimeout
		if s.name == expectFailing {
			timeout = deniedWindow
		}
		ctx, cancel := context.WithTimeout(h.Ctx, timeout)
		start := time.Now()
		err := s.run(ctx, fmt.Sprintf("r%d", w.run))
		cancel()
		if err != nil {
			t.Logf("step %q failed after %s: %v", s.name, time.Since(start).Round(time.Millisecond), err)
			return s.name, p.Logs()
		}
		t.Logf("step %q passed in %s", s.name, time.Since(start).Round(time.Millisecond))
	}
	return "", p.Logs()
}

// requireNoneRefused fails the test if a line of the scheduler's logs
// shows a request the apiserver refused.
func requireNoneRefused(t *testing.T, logs string) {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		require.NotContains(t, line, "forbidden", "a request was refused with every grant in place")
	}
}

const (
	rbacRunLabel  = "flotilla.dev/rbac-run"
	preemptNode   = "rbac-preempt"
	draNode       = "rbac-dra"
	draClass      = "gpu.example.com"
	extendedClass = "extended.example.com"
	extendedName  = "example.com/gpu"
)

func newRBACWorld(t *testing.T, h *harness.Harness, ca *cluster.ClientCA) *rbacWorld {
	ctx := h.Ctx
	w := &rbacWorld{h: h}
	require.NoError(t, h.CreateNodes(ctx,
		cluster.NodeSpec{Name: "rbac-big", CPU: "1000", Memory: "4000Gi", Pods: 1000},
		cluster.NodeSpec{Name: draNode, CPU: "1000", Memory: "4000Gi", Pods: 1000},
	))
	// A node only the preemption step's pods tolerate, so that nothing else
	// lands there and the higher-priority pod has nowhere else to go.
	tiny := cluster.Node(cluster.NodeSpec{Name: preemptNode, CPU: "2", Memory: "8Gi", Labels: map[string]string{"rbac-step": "preempt"}})
	tiny.Spec.Taints = []corev1.Taint{{Key: "rbac-step", Value: "preempt", Effect: corev1.TaintEffectNoSchedule}}
	_, err := h.Client.CoreV1().Nodes().Create(ctx, tiny, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, h.CreatePriorityClass(ctx, "low", 10, false))
	require.NoError(t, h.CreatePriorityClass(ctx, "high", 1000, false))

	// DRA: a node's slice of devices, a class for claims, and a class that
	// serves the extended resource example.com/gpu.
	_, err = h.Client.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: draClass}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.Client.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: extendedClass},
		Spec:       resourcev1.DeviceClassSpec{ExtendedResourceName: ptr.To(extendedName)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// Every run that reaches the DRA steps keeps two devices: nothing here
	// deallocates claims.
	var devices []resourcev1.Device
	for i := 0; i < 96; i++ {
		devices = append(devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%02d", i)})
	}
	_, err = h.Client.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: draNode + "-gpus"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   draClass,
			Pool:     resourcev1.ResourcePool{Name: draNode, ResourceSliceCount: 1},
			NodeName: ptr.To(draNode),
			Devices:  devices,
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// Prometheus: a ServiceAccount and a certificate user allowed /metrics.
	_, err = h.Client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = h.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
		Subjects: []rbacv1.Subject{
			{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: "prometheus"},
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "prometheus-cert"},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	w.token, err = h.ServiceAccountToken(ctx, "default", "prometheus")
	require.NoError(t, err)
	w.clientCert, err = ca.Issue("prometheus-cert")
	require.NoError(t, err)
	return w
}

// reset removes what earlier runs left (their pods, the dead scheduler's
// lease), so that each run starts from the same cluster.
func (w *rbacWorld) reset(t *testing.T) {
	ctx, client := w.h.Ctx, w.h.Client
	require.NoError(t, client.CoreV1().Pods("default").DeleteCollection(ctx,
		metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{LabelSelector: rbacRunLabel}))
	err := client.CoordinationV1().Leases(w.lease.Namespace).Delete(ctx, w.lease.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
}

type rbacStep struct {
	name string
	// run does the step for the run named id and waits for its outcome
	// until ctx ends.
	run func(ctx context.Context, id string) error
}

func (w *rbacWorld) steps() []rbacStep {
	return []rbacStep{
		{stepCachesSync, w.cachesSync},
		{stepLease, w.leaseAcquired},
		{stepUnschedulable, w.toldUnschedulable},
		{stepBind, w.bound},
		{stepEvent, w.eventRecorded},
		{stepGangStatus, w.gangStatusPublished},
		{stepGangWaiting, w.gangWaitingSaid},
		{stepQueueStatus, w.queueStatusPublished},
		{stepPreempt, w.preempted},
		{stepClaimAllocated, w.claimAllocated},
		{stepExtendedClaim, w.extendedResourceClaimed},
		{stepMetricsToken, func(ctx context.Context, _ string) error {
			return w.readMetrics(ctx, cluster.Insecure, "Bearer "+w.token)
		}},
		{stepMetricsClientCA, func(ctx context.Context, _ string) error {
			withCert := &http.Client{Timeout: cluster.Insecure.Timeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{w.clientCert}}}} //nolint:gosec // a local test endpoint
			return w.readMetrics(ctx, withCert, "")
		}},
	}
}

func (w *rbacWorld) pod(id, name string, spec cluster.PodSpec) *corev1.Pod {
	spec.Name = id + "-" + name
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	spec.Labels[rbacRunLabel] = id
	return cluster.Pod(spec)
}

func (w *rbacWorld) create(ctx context.Context, pods ...*corev1.Pod) error {
	for _, p := range pods {
		if _, err := w.h.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func (w *rbacWorld) waitBound(ctx context.Context, pods ...*corev1.Pod) error {
	for _, p := range pods {
		if _, err := w.h.WaitForPodBound(ctx, p.Namespace, p.Name, stepTimeout); err != nil {
			return err
		}
	}
	return nil
}

func (w *rbacWorld) cachesSync(ctx context.Context, _ string) error {
	return cluster.Poll(ctx, 100*time.Millisecond, 0, func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/readyz?verbose", w.port), nil)
		if err != nil {
			return false, "", err
		}
		resp, err := cluster.Insecure.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), "[+]sched-handler-sync ok"), string(body), nil
	})
}

func (w *rbacWorld) leaseAcquired(ctx context.Context, _ string) error {
	return cluster.Poll(ctx, 100*time.Millisecond, 0, func(ctx context.Context) (bool, string, error) {
		lease, err := w.h.Client.CoordinationV1().Leases(w.lease.Namespace).Get(ctx, w.lease.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "no lease", nil
		}
		if err != nil {
			return false, "", err
		}
		return holder(lease) != "", "holder " + holder(lease), nil
	})
}

func holder(lease *coordinationv1.Lease) string {
	return ptr.Deref(lease.Spec.HolderIdentity, "")
}

func (w *rbacWorld) toldUnschedulable(ctx context.Context, id string) error {
	p := w.pod(id, "too-big", cluster.PodSpec{CPU: "100000"})
	if err := w.create(ctx, p); err != nil {
		return err
	}
	_, err := w.h.WaitForPodUnschedulable(ctx, p.Namespace, p.Name, stepTimeout)
	return err
}

func (w *rbacWorld) bound(ctx context.Context, id string) error {
	pods := []*corev1.Pod{w.pod(id, "plain", cluster.PodSpec{CPU: "1"})}
	if w.servesDefault {
		pods = append(pods, w.pod(id, "default-profile", cluster.PodSpec{CPU: "1", SchedulerName: corev1.DefaultSchedulerName}))
	}
	if err := w.create(ctx, pods...); err != nil {
		return err
	}
	return w.waitBound(ctx, pods...)
}

func (w *rbacWorld) eventRecorded(ctx context.Context, id string) error {
	_, err := w.h.WaitForEvent(ctx, "default", id+"-plain", "Scheduled", stepTimeout)
	return err
}

func (w *rbacWorld) gangStatusPublished(ctx context.Context, id string) error {
	if err := w.h.CreatePodGroup(ctx, "default", id, 2); err != nil {
		return err
	}
	var members []*corev1.Pod
	for i := 0; i < 2; i++ {
		members = append(members, w.pod(id, fmt.Sprintf("member-%d", i), cluster.PodSpec{CPU: "1", PodGroup: id}))
	}
	if err := w.create(ctx, members...); err != nil {
		return err
	}
	if err := w.waitBound(ctx, members...); err != nil {
		return err
	}
	return cluster.Poll(ctx, 100*time.Millisecond, 0, func(ctx context.Context) (bool, string, error) {
		pg, err := w.h.PodGroups.SchedulingV1alpha1().PodGroups("default").Get(ctx, id, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return pg.Status.Phase == gang.PodGroupScheduled, fmt.Sprintf("phase %q", pg.Status.Phase), nil
	})
}

func (w *rbacWorld) gangWaitingSaid(ctx context.Context, id string) error {
	group := id + "-waiting" // id names the gang of the status step
	if err := w.h.CreatePodGroup(ctx, "default", group, 2); err != nil {
		return err
	}
	first := w.pod(id, "waiting-0", cluster.PodSpec{CPU: "1", PodGroup: group})
	if err := w.create(ctx, first); err != nil {
		return err
	}
	says := func(want reasons.Reason) error {
		return cluster.Poll(ctx, 100*time.Millisecond, 0, func(ctx context.Context) (bool, string, error) {
			pg, err := w.h.PodGroups.SchedulingV1alpha1().PodGroups("default").Get(ctx, group, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			got := pg.Annotations[flotillav1alpha1.WaitingReasonAnnotation]
			return got == string(want), fmt.Sprintf("waiting-reason %q", got), nil
		})
	}
	if err := says(reasons.WaitingForMembers); err != nil {
		return err
	}
	second := w.pod(id, "waiting-1", cluster.PodSpec{CPU: "1", PodGroup: group})
	if err := w.create(ctx, second); err != nil {
		return err
	}
	if err := w.waitBound(ctx, first, second); err != nil {
		return err
	}
	return says("")
}

func (w *rbacWorld) queueStatusPublished(ctx context.Context, id string) error {
	if err := w.h.CreateQueue(ctx, cluster.Queue(id, 1, "")); err != nil {
		return err
	}
	p := w.pod(id, "queued", cluster.PodSpec{CPU: "3", Labels: map[string]string{flotillav1alpha1.QueueLabel: id}})
	if err := w.create(ctx, p); err != nil {
		return err
	}
	if err := w.waitBound(ctx, p); err != nil {
		return err
	}
	return cluster.Poll(ctx, 100*time.Millisecond, 0, func(ctx context.Context) (bool, string, error) {
		q, err := w.h.GetQueue(ctx, id)
		if err != nil {
			return false, "", err
		}
		cpu := q.Status.Allocated[corev1.ResourceCPU]
		return cpu.Cmp(resource.MustParse("3")) == 0, fmt.Sprintf("allocated %v", q.Status.Allocated), nil
	})
}

func (w *rbacWorld) preempted(ctx context.Context, id string) error {
	pinned := func(name, priority string) *corev1.Pod {
		p := w.pod(id, name, cluster.PodSpec{CPU: "2", PriorityClassName: priority})
		p.Spec.NodeSelector = map[string]string{"rbac-step": "preempt"}
		p.Spec.Tolerations = []corev1.Toleration{{Key: "rbac-step", Operator: corev1.TolerationOpEqual, Value: "preempt", Effect: corev1.TaintEffectNoSchedule}}
		return p
	}
	victim, preemptor := pinned("victim", "low"), pinned("preemptor", "high")
	if err := w.create(ctx, victim); err != nil {
		return err
	}
	if err := w.waitBound(ctx, victim); err != nil {
		return err
	}
	if err := w.create(ctx, preemptor); err != nil {
		return err
	}
	return cluster.Poll(ctx, 100*time.Millisecond, 0, func(ctx context.Context) (bool, string, error) {
		got, err := w.h.Client.CoreV1().Pods("default").Get(ctx, victim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return got.DeletionTimestamp != nil, "victim not deleted", nil
	})
}

func (w *rbacWorld) claimAllocated(ctx context.Context, id string) error {
	claims := w.h.Client.ResourceV1().ResourceClaims("default")
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: id},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: draClass},
		}}}},
	}
	if _, err := claims.Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return err
	}
	p := w.pod(id, "claims", cluster.PodSpec{CPU: "1"})
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(id)}}
	p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	if err := w.create(ctx, p); err != nil {
		return err
	}
	if err := w.waitBound(ctx, p); err != nil {
		return err
	}
	got, err := claims.Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got.Status.Allocation == nil {
		return fmt.Errorf("pod bound but claim %s not allocated", id)
	}
	return nil
}

func (w *rbacWorld) extendedResourceClaimed(ctx context.Context, id string) error {
	p := w.pod(id, "extended", cluster.PodSpec{CPU: "1", Extended: map[corev1.ResourceName]string{extendedName: "1"}})
	if err := w.create(ctx, p); err != nil {
		return err
	}
	return w.waitBound(ctx, p)
}

func (w *rbacWorld) readMetrics(ctx context.Context, client *http.Client, authorization string) error {
	return cluster.Poll(ctx, 100*time.Millisecond, 0, func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", w.port), nil)
		if err != nil {
			return false, "", err
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	})
}
