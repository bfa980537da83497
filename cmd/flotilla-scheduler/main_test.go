package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/flotilla-sched/flotilla/apis/config"
	"github.com/flotilla-sched/flotilla/internal/cluster/launch"
	"github.com/flotilla-sched/flotilla/manifests"
	"github.com/flotilla-sched/flotilla/plugins/binpack"
	"github.com/flotilla-sched/flotilla/plugins/gang"
	"github.com/flotilla-sched/flotilla/plugins/proportion"
)

// setup runs the binary's start-up on a configuration, up to a built
// scheduler. Nothing here talks to an apiserver, so the kubeconfig points
// nowhere.
func setup(t *testing.T, config []byte) (*launch.Setup, error) {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := unreachableKubeconfig(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := launch.New(ctx, dir, config, kubeconfig, nil)
	if s != nil {
		t.Cleanup(s.Close)
	}
	return s, err
}

// unreachableKubeconfig writes a kubeconfig for an apiserver that does not
// exist: start-up builds clients but does not call them.
func unreachableKubeconfig(t *testing.T, dir string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c"}
	kc.CurrentContext = "c"
	path := filepath.Join(dir, "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

func enabledNames(plugins []schedconfig.Plugin) []string {
	var names []string
	for _, p := range plugins {
		names = append(names, p.Name)
	}
	return names
}

func TestShippedConfigurations(t *testing.T) {
	wantBinpackArgs := &config.BinpackArgs{
		Resources: []config.ResourceWeight{
			{Name: corev1.ResourceCPU, Weight: 1},
			{Name: corev1.ResourceMemory, Weight: 1},
			{Name: "nvidia.com/gpu", Weight: 4},
		},
		ScarceResources: []corev1.ResourceName{"nvidia.com/gpu"},
	}
	for _, tc := range []struct {
		file         string
		wantProfiles []string
		wantLease    string
	}{
		{file: "scheduler-config.yaml", wantProfiles: []string{"flotilla-scheduler"}, wantLease: "flotilla-system/flotilla-scheduler"},
		{file: "scheduler-config-replace-default.yaml", wantProfiles: []string{"default-scheduler", "flotilla-scheduler"}, wantLease: "kube-system/kube-scheduler"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := manifests.File(tc.file)
			require.NoError(t, err)
			s, err := setup(t, data)
			require.NoError(t, err)

			le := s.Config.ComponentConfig.LeaderElection
			assert.True(t, le.LeaderElect)
			assert.Equal(t, tc.wantLease, le.ResourceNamespace+"/"+le.ResourceName)

			var profiles []string
			for _, p := range s.Config.ComponentConfig.Profiles {
				profiles = append(profiles, p.SchedulerName)
			}
			assert.ElementsMatch(t, tc.wantProfiles, profiles)

			for name, fw := range s.Scheduler.Profiles {
				assert.Equal(t, []string{gang.Name}, enabledNames(fw.ListPlugins().QueueSort.Enabled), "profile %s: one binary, one queue sort", name)
			}
			fw, ok := s.Scheduler.Profiles["flotilla-scheduler"]
			require.True(t, ok)
			got := fw.ListPlugins()
			for point, plugins := range map[string][]schedconfig.Plugin{
				"PreEnqueue": got.PreEnqueue.Enabled, "PreFilter": got.PreFilter.Enabled, "PostFilter": got.PostFilter.Enabled,
				"Reserve": got.Reserve.Enabled, "Permit": got.Permit.Enabled,
			} {
				assert.Contains(t, enabledNames(plugins), gang.Name, point)
			}
			assert.Contains(t, enabledNames(got.PreFilter.Enabled), proportion.Name)
			// Proportion's PreFilter before Gang's: a gang its queue refuses
			// starts no attempt (state.QueueRefusedKey).
			preFilter := enabledNames(got.PreFilter.Enabled)
			assert.Less(t, slices.Index(preFilter, proportion.Name), slices.Index(preFilter, gang.Name), "PreFilter order %v", preFilter)
			assert.Contains(t, enabledNames(got.Reserve.Enabled), proportion.Name)
			assert.Contains(t, enabledNames(got.PreScore.Enabled), binpack.Name)
			score := map[string]int32{}
			for _, p := range got.Score.Enabled {
				score[p.Name] = p.Weight
			}
			assert.Equal(t, int32(10), score[binpack.Name], "binpack must outweigh the in-tree scores")
			assert.NotContains(t, score, "NodeResourcesFit", "LeastAllocated spreads pods")
			assert.NotContains(t, score, "NodeResourcesBalancedAllocation")
			assert.Contains(t, enabledNames(got.Filter.Enabled), "NodeResourcesFit", "resources must still be filtered")

			var args *config.BinpackArgs
			var gangArgs *config.GangArgs
			for _, p := range s.Config.ComponentConfig.Profiles {
				if p.SchedulerName != "flotilla-scheduler" {
					continue
				}
				for _, pc := range p.PluginConfig {
					switch pc.Name {
					case binpack.Name:
						args, ok = pc.Args.(*config.BinpackArgs)
						require.True(t, ok, "args decoded as %T, want typed BinpackArgs", pc.Args)
					case gang.Name:
						gangArgs, ok = pc.Args.(*config.GangArgs)
						require.True(t, ok, "args decoded as %T, want typed GangArgs", pc.Args)
					}
				}
			}
			require.NotNil(t, args)
			require.NotNil(t, gangArgs)
			assert.Equal(t, &config.GangArgs{PermitWaitingTimeSeconds: 60, BackoffSeconds: 10, MaxMembersInFlight: 96,
				TopologyLevels: []string{"topology.kubernetes.io/zone", "nvidia.com/gpu.clique", "kubernetes.io/hostname"},
				Reservation:    config.ReservationArgs{MaxGangs: 0, AfterSeconds: 10, MaxClusterPercent: 80}}, gangArgs)
			assert.Equal(t, wantBinpackArgs.Resources, args.Resources)
			assert.Equal(t, wantBinpackArgs.ScarceResources, args.ScarceResources)

			if fw, ok := s.Scheduler.Profiles["default-scheduler"]; ok {
				assert.NotContains(t, enabledNames(fw.ListPlugins().Score.Enabled), binpack.Name, "the default profile must stay unchanged")
			}
		})
	}
}

// profileWithArgs is a one-profile configuration enabling plugin with the
// given args (YAML lines indented for "args:").
func profileWithArgs(plugin, args string) []byte {
	return []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: flotilla-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: ` + plugin + `
    queueSort:
      enabled:
      - name: Gang
      disabled:
      - name: "*"
  pluginConfig:
  - name: ` + plugin + `
    args:
` + args)
}

func profileWithBinpackArgs(args string) []byte { return profileWithArgs(binpack.Name, args) }

func gangArgsConfig(args string) []byte { return profileWithArgs(gang.Name, args) }

// Usage is off unless a half-life is set; its other args are defaulted
// either way, so turning it on needs one field. The demand hold is on
// by default, 5s; 0 turns it off.
func TestProportionUsageArgsDefaulted(t *testing.T) {
	for name, tc := range map[string]struct {
		args string
		want config.ProportionArgs
	}{
		"off by default": {args: "      {}\n", want: config.ProportionArgs{DefaultQueue: "default", UsageWeight: 1,
			UsageStatusInterval: metav1.Duration{Duration: 30 * time.Second}, UsageReclaimMinRuntime: metav1.Duration{Duration: 5 * time.Minute},
			DemandHold: metav1.Duration{Duration: 5 * time.Second}}},
		"on with a half-life": {args: "      usageHalfLife: 1h\n      usageWeight: 2\n", want: config.ProportionArgs{DefaultQueue: "default",
			UsageHalfLife: metav1.Duration{Duration: time.Hour}, UsageWeight: 2,
			UsageStatusInterval: metav1.Duration{Duration: 30 * time.Second}, UsageReclaimMinRuntime: metav1.Duration{Duration: 5 * time.Minute},
			DemandHold: metav1.Duration{Duration: 5 * time.Second}}},
		"demand hold off": {args: "      demandHold: 0s\n", want: config.ProportionArgs{DefaultQueue: "default", UsageWeight: 1,
			UsageStatusInterval: metav1.Duration{Duration: 30 * time.Second}, UsageReclaimMinRuntime: metav1.Duration{Duration: 5 * time.Minute}}},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := setup(t, profileWithArgs(proportion.Name, tc.args))
			require.NoError(t, err)
			var got *config.ProportionArgs
			for _, pc := range s.Config.ComponentConfig.Profiles[0].PluginConfig {
				if pc.Name == proportion.Name {
					got = pc.Args.(*config.ProportionArgs)
				}
			}
			require.NotNil(t, got)
			tc.want.TypeMeta = got.TypeMeta
			assert.Equal(t, tc.want, *got)
		})
	}
}

func TestBinpackArgsDefaulted(t *testing.T) {
	s, err := setup(t, profileWithBinpackArgs("      {}\n"))
	require.NoError(t, err)
	args := s.Config.ComponentConfig.Profiles[0].PluginConfig
	var got *config.BinpackArgs
	for _, pc := range args {
		if pc.Name == binpack.Name {
			got = pc.Args.(*config.BinpackArgs)
		}
	}
	require.NotNil(t, got)
	assert.Equal(t, []config.ResourceWeight{{Name: corev1.ResourceCPU, Weight: 1}, {Name: corev1.ResourceMemory, Weight: 1}}, got.Resources)
	assert.Equal(t, []corev1.ResourceName{"nvidia.com/gpu"}, got.ScarceResources)
}

// A bad pluginConfig must stop the scheduler at start-up with an error that
// names the offending field.
func TestBadPluginArgsRefusedAtStartup(t *testing.T) {
	for name, tc := range map[string]struct {
		config    []byte
		wantError []string
	}{
		"negative weight": {
			config:    profileWithBinpackArgs("      resources:\n      - {name: cpu, weight: -1}\n"),
			wantError: []string{"args.resources[0].weight", "must be in the range 0-100"},
		},
		"weight out of range": {
			config:    profileWithBinpackArgs("      resources:\n      - {name: cpu, weight: 1000}\n"),
			wantError: []string{"args.resources[0].weight"},
		},
		"all weights zero": {
			config:    profileWithBinpackArgs("      resources:\n      - {name: cpu, weight: 0}\n      - {name: memory, weight: 0}\n"),
			wantError: []string{"args.resources", "at least one weight must be greater than 0"},
		},
		"duplicate resource": {
			config:    profileWithBinpackArgs("      resources:\n      - {name: cpu}\n      - {name: cpu}\n"),
			wantError: []string{"args.resources[1].name", "Duplicate value"},
		},
		"invalid resource name": {
			config:    profileWithBinpackArgs("      resources:\n      - {name: 'not a/valid/name'}\n"),
			wantError: []string{"args.resources[0].name"},
		},
		"invalid scarce resource": {
			config:    profileWithBinpackArgs("      scarceResources: ['-bad-']\n"),
			wantError: []string{"args.scarceResources[0]"},
		},
		"device class weight out of range": {
			config:    profileWithBinpackArgs("      deviceClasses: {weight: 101}\n"),
			wantError: []string{"args.deviceClasses.weight", "must be in the range 0-100"},
		},
		"unknown field": {
			config:    profileWithBinpackArgs("      resourcez: []\n"),
			wantError: []string{"pluginConfig[0]", "plugin Binpack", `unknown field "resourcez"`},
		},
		"gang timeout zero": {
			config:    gangArgsConfig("      permitWaitingTimeSeconds: 0\n"),
			wantError: []string{"args.permitWaitingTimeSeconds", "must be in the range 1-3600"},
		},
		"gang negative backoff": {
			config:    gangArgsConfig("      backoffSeconds: -5\n"),
			wantError: []string{"args.backoffSeconds"},
		},
		"gang negative members in flight": {
			config:    gangArgsConfig("      maxMembersInFlight: -1\n"),
			wantError: []string{"args.maxMembersInFlight", "must be in the range 0-100000"},
		},
		"reservation negative gangs": {
			config:    gangArgsConfig("      reservation: {maxGangs: -1}\n"),
			wantError: []string{"args.reservation.maxGangs", "must be in the range 0-100"},
		},
		"reservation waits a negative time": {
			config:    gangArgsConfig("      reservation: {afterSeconds: -10}\n"),
			wantError: []string{"args.reservation.afterSeconds", "must be in the range 0-3600"},
		},
		"reservation holds more than the cluster": {
			config:    gangArgsConfig("      reservation: {maxGangs: 2, maxClusterPercent: 150}\n"),
			wantError: []string{"args.reservation.maxClusterPercent", "must be in the range 1-100"},
		},
		"reservation holds nothing": {
			config:    gangArgsConfig("      reservation: {maxGangs: 1, maxClusterPercent: 0}\n"),
			wantError: []string{"args.reservation.maxClusterPercent"},
		},
		"reservation unknown field": {
			config:    gangArgsConfig("      reservation: {maxGang: 2}\n"),
			wantError: []string{"plugin Gang", `unknown field "reservation.maxGang"`},
		},
		"gang topology level not a label key": {
			config:    gangArgsConfig("      topologyLevels: [topology.kubernetes.io/zone, 'not a label']\n"),
			wantError: []string{"args.topologyLevels[1]", "must be a node label key"},
		},
		"gang topology level twice": {
			config:    gangArgsConfig("      topologyLevels: [example.com/rack, example.com/rack]\n"),
			wantError: []string{"args.topologyLevels[1]", "also topologyLevels[0]"},
		},
		"usage half-life negative": {
			config:    profileWithArgs(proportion.Name, "      usageHalfLife: -1h\n"),
			wantError: []string{"args.usageHalfLife", "must be 0 (usage off) or positive"},
		},
		"usage half-life beyond a season": {
			config:    profileWithArgs(proportion.Name, "      usageHalfLife: 2400h\n"),
			wantError: []string{"args.usageHalfLife", "must be at most 2160h0m0s"},
		},
		"usage half-life under a second": {
			config:    profileWithArgs(proportion.Name, "      usageHalfLife: 100ms\n"),
			wantError: []string{"args.usageHalfLife", "at least 1s"},
		},
		"usage weight zero": {
			config:    profileWithArgs(proportion.Name, "      usageHalfLife: 1h\n      usageWeight: 0\n"),
			wantError: []string{"args.usageWeight", "must be above 0 and at most 4"},
		},
		"usage status interval too short": {
			config:    profileWithArgs(proportion.Name, "      usageHalfLife: 1h\n      usageStatusInterval: 10ms\n"),
			wantError: []string{"args.usageStatusInterval", "at least 1s"},
		},
		"usage reclaim runtime negative": {
			config:    profileWithArgs(proportion.Name, "      usageHalfLife: 1h\n      usageReclaimMinRuntime: -1m\n"),
			wantError: []string{"args.usageReclaimMinRuntime", "must not be negative"},
		},
		"negative demand hold": {
			config:    profileWithArgs(proportion.Name, "      demandHold: -1s\n"),
			wantError: []string{"args.demandHold", "between 0 (off) and 5m0s"},
		},
		"demand hold too long": {
			config:    profileWithArgs(proportion.Name, "      demandHold: 1h\n"),
			wantError: []string{"args.demandHold", "between 0 (off) and 5m0s"},
		},
		"wrong type": {
			config:    profileWithBinpackArgs("      resources:\n      - {name: cpu, weight: heavy}\n"),
			wantError: []string{"Binpack", "weight"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := setup(t, tc.config)
			require.Error(t, err)
			for _, want := range tc.wantError {
				assert.Contains(t, err.Error(), want)
			}
		})
	}
}

func TestVersionNamesFlotilla(t *testing.T) {
	version = "v9.9.9-test"
	t.Cleanup(func() { version = "" })
	assert.Equal(t, "v9.9.9-test", flotillaVersion())
	assert.True(t, strings.HasPrefix(dependencyVersion("k8s.io/kubernetes"), "v1.37"), "built against %s", dependencyVersion("k8s.io/kubernetes"))
}

// Opportunistic batching (KEP-5598) stays on in flotilla's profile: every
// plugin of ours that filters or scores signs pods, so kube-scheduler does
// not turn signatures off for the whole profile. A pod of no gang gets a
// signature; a gang member never does (its gang's plan, not the previous
// pod's ranking, places it). PodTopologySpread's system-default
// constraints make no pod signable, in the default profile as in ours, so
// the check lists its constraints instead, as a cluster that wants
// batching does.
func TestProfileKeepsOpportunisticBatching(t *testing.T) {
	data, err := manifests.File("scheduler-config.yaml")
	require.NoError(t, err)
	config := strings.Replace(string(data), "  pluginConfig:\n", "  pluginConfig:\n  - name: PodTopologySpread\n    args:\n      defaultingType: List\n", 1)
	require.NotEqual(t, string(data), config)
	s, err := setup(t, []byte(config))
	require.NoError(t, err)
	fw, ok := s.Scheduler.Profiles["flotilla-scheduler"]
	require.True(t, ok)
	ctx := context.Background()
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "plain", UID: "plain"}, Spec: corev1.PodSpec{
		SchedulerName: "flotilla-scheduler",
		Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
	}}
	assert.NotNil(t, fw.SignPod(ctx, plain), "the profile signs plain pods")
	member := plain.DeepCopy()
	member.Labels = map[string]string{schedv1alpha1.PodGroupLabel: "g"}
	assert.Nil(t, fw.SignPod(ctx, member), "a gang member is not signed")
}
