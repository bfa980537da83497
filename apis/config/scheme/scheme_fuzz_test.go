package scheme_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/flotilla-sched/flotilla/apis/config"
	_ "github.com/flotilla-sched/flotilla/apis/config/scheme"
	"github.com/flotilla-sched/flotilla/apis/config/validation"
)

// FuzzPluginArgs feeds arbitrary args for every flotilla plugin through the
// scheduler's own configuration decoding (strict decode, defaulting,
// conversion to the internal types) and then through validation. Whatever
// the input, the outcome is an error or valid typed args — never a panic.
func FuzzPluginArgs(f *testing.F) {
	for _, seed := range []string{
		"resources: [{name: cpu, weight: 1}]",
		"resources: [{name: nvidia.com/gpu, weight: -4}]\nscarceResources: []",
		"permitWaitingTimeSeconds: 0\nbackoffSeconds: 99999",
		"defaultQueue: ''",
		"{}",
		"resources: {name: cpu}",
		"weight: [1, 2]",
	} {
		for _, plugin := range []uint8{0, 1, 2} {
			f.Add(plugin, seed)
		}
	}
	f.Fuzz(func(t *testing.T, plugin uint8, args string) {
		name := []string{"Binpack", "Gang", "Proportion"}[int(plugin)%3]
		doc := "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: x\n  pluginConfig:\n  - name: " +
			name + "\n    args:\n" + indent(args)
		obj, _, err := kubeschedulerscheme.Codecs.UniversalDecoder().Decode([]byte(doc), nil, nil)
		if err != nil {
			return
		}
		cfg, ok := obj.(*schedconfig.KubeSchedulerConfiguration)
		if !ok || len(cfg.Profiles) == 0 || len(cfg.Profiles[0].PluginConfig) == 0 {
			return
		}
		path := field.NewPath("args")
		switch a := cfg.Profiles[0].PluginConfig[0].Args.(type) {
		case *config.BinpackArgs:
			_ = validation.ValidateBinpackArgs(path, a)
		case *config.GangArgs:
			_ = validation.ValidateGangArgs(path, a)
		case *config.ProportionArgs:
			_ = validation.ValidateProportionArgs(path, a)
		case nil:
		default:
			t.Fatalf("args for %s decoded as %T, not our typed args", name, a)
		}
	})
}

func indent(s string) string {
	out := "      "
	for _, r := range s {
		out += string(r)
		if r == '\n' {
			out += "      "
		}
	}
	return out
}
