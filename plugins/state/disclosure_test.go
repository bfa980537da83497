package state

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWorkloadSeenFrom(t *testing.T) {
	gang := Workload{Kind: "gang", Namespace: "team-a", Name: "team-a/train"}
	pod := Workload{Kind: "pod", Namespace: "team-b", Name: "team-b/web-0"}
	tests := []struct {
		name, reader string
		workload     Workload
		want         string
	}{
		{"a gang read from its namespace", "team-a", gang, "gang team-a/train"},
		{"a gang read from another", "team-b", gang, "a gang of another namespace"},
		{"a pod read from another", "team-a", pod, "a pod of another namespace"},
		{"a pod read from its namespace", "team-b", pod, "pod team-b/web-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.workload.SeenFrom(tt.reader))
		})
	}
}

func TestWorkloadsSeenFrom(t *testing.T) {
	a1 := Workload{Kind: "gang", Namespace: "a", Name: "a/one"}
	a2 := Workload{Kind: "pod", Namespace: "a", Name: "a/two"}
	b := Workload{Kind: "gang", Namespace: "b", Name: "b/three"}
	c := Workload{Kind: "pod", Namespace: "c", Name: "c/four"}
	tests := []struct {
		name, reader string
		workloads    []Workload
		want         string
	}{
		{"all of the reader's namespace, in order", "a", []Workload{a1, a2}, "gang a/one, pod a/two"},
		{"one of another namespace", "a", []Workload{b, a1}, "gang a/one, 1 of another namespace"},
		{"none of the reader's", "a", []Workload{b, c}, "2 of other namespaces"},
		{"read from b", "b", []Workload{a1, b, c}, "gang b/three, 2 of other namespaces"},
		{"nothing", "a", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, WorkloadsSeenFrom(tt.reader, tt.workloads))
		})
	}
}
