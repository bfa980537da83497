package cluster

import (
	"testing"

	"sigs.k8s.io/kwok/pkg/apis/internalversion"
)

// The simulator's stages parse, and each kind gets the ones it needs: a
// YAML slip would otherwise show only as pods that never end.
func TestKubeletStagesParse(t *testing.T) {
	stages, err := parseStages()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, list := range stages {
		for _, s := range list {
			names[s.Name] = true
		}
	}
	for _, want := range []string{"pod-ready", "sim-pod-succeed", "sim-pod-fail", "sim-pod-stop", "sim-pod-delete", "node-initialize", "node-heartbeat-with-lease"} {
		if !names[want] {
			t.Errorf("stage %s missing; have %v", want, names)
		}
	}
	if n := len(stages[internalversion.StageResourceRef{APIGroup: "v1", Kind: "Pod"}]); n != 5 {
		t.Errorf("%d pod stages, want 5", n)
	}
}
