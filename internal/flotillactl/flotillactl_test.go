package flotillactl

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	flotillav1alpha1 "github.com/flotilla-sched/flotilla/apis/scheduling/v1alpha1"
)

// A queue's rows: one per resource any of its lists names, sorted; pending
// is requested less allocated; guarantee and capability empty where unset;
// Valid from its condition.
func TestRowsOf(t *testing.T) {
	q := &flotillav1alpha1.Queue{
		ObjectMeta: metav1.ObjectMeta{Name: "team"},
		Spec: flotillav1alpha1.QueueSpec{Weight: 2, Parent: "org",
			Capability: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			Guarantee:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
		Status: flotillav1alpha1.QueueStatus{
			Deserved:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10"), "nvidia.com/gpu": resource.MustParse("4")},
			Allocated:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")},
			Requested:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("9"), "nvidia.com/gpu": resource.MustParse("2")},
			Conditions: []metav1.Condition{{Type: "Valid", Status: metav1.ConditionFalse}}, RunningGangs: 1, PendingGangs: 3,
		},
	}
	rows := rowsOf(q, 1)
	assert.Equal(t, []QueueRow{
		{Queue: "team", Depth: 1, Parent: "org", Weight: 2, Resource: "cpu", Guarantee: "4", Deserved: "10", Allocated: "6", Pending: "3", RunningGangs: 1, PendingGangs: 3},
		{Queue: "team", Depth: 1, Parent: "org", Weight: 2, Resource: "nvidia.com/gpu", Capability: "8", Deserved: "4", Allocated: "0", Pending: "2", RunningGangs: 1, PendingGangs: 3},
	}, rows)
	empty := rowsOf(&flotillav1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, 0)
	assert.Len(t, empty, 1, "a queue with nothing yet still has a row")
	assert.True(t, empty[0].Valid, "no Valid condition yet is not invalid")
}

// The events of the objects asked about, oldest first, the last few only.
func TestEventsOf(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	event := func(kind, name string, at int, reason string) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name}, Reason: reason,
			LastTimestamp: metav1.NewTime(t0.Add(time.Duration(at) * time.Second))}
	}
	var all []corev1.Event
	for i := 7; i >= 0; i-- {
		all = append(all, event("Pod", "a", i, fmt.Sprint("r", i)))
	}
	all = append(all, event("Pod", "other", 9, "not asked"), event("PodGroup", "g", 8, "group"))
	got := eventsOf(all, map[string]bool{"Pod/a": true, "PodGroup/g": true})
	var reasons []string
	for _, e := range got {
		reasons = append(reasons, e.Reason)
	}
	assert.Equal(t, []string{"r4", "r5", "r6", "r7", "group"}, reasons)
}

// Every -o format kubectl's commands take, on the rows of one command.
func TestPrintFormats(t *testing.T) {
	since := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	entries := []PendingEntry{
		{Queue: "team", Position: 1, Kind: "gang", Name: "default/too-big", Since: since, Pending: 3, MinMember: 3, Reasons: []string{"InsufficientResources"}, Message: "does not fit"},
		{Queue: "team", Position: 2, Kind: "pod", Name: "default/lost", Since: since, Pending: 1, Reasons: []string{"InvalidSpec"}, Message: "no queue"},
	}
	items := []item{{value: entries[0], name: objectName(entries[0].Kind, entries[0].Name)}, {value: entries[1], name: objectName(entries[1].Kind, entries[1].Name)}}
	table := func(w io.Writer, wide bool) {
		fmt.Fprintln(w, "NAME\tREASON")
		if wide {
			fmt.Fprintln(w, "wide")
		}
	}
	for _, c := range []struct {
		output  string
		want    []string
		wantErr string
	}{
		{output: "", want: []string{"NAME  REASON\n"}},
		{output: "wide", want: []string{"NAME  REASON\n", "wide"}},
		{output: "name", want: []string{"podgroup/too-big\npod/lost\n"}},
		{output: "json", want: []string{`"kind": "List"`, `"kind": "PendingEntry"`, `"apiVersion": "cli.flotilla.dev/v1alpha1"`, `"name": "default/too-big"`, `"minMember": 3`}},
		{output: "yaml", want: []string{"kind: List", "- apiVersion: cli.flotilla.dev/v1alpha1", "  name: default/lost"}},
		{output: "jsonpath={.items[*].name}", want: []string{"default/too-big default/lost"}},
		{output: "jsonpath-as-json={.items[0].reasons}", want: []string{`"InsufficientResources"`}},
		{output: "go-template={{range .items}}{{.queue}}:{{.position}} {{end}}", want: []string{"team:1 team:2 "}},
		{output: "custom-columns=GANG:.name,WHY:.reasons[0],MIN:.minMember", want: []string{"GANG             WHY                    MIN\n", "default/too-big  InsufficientResources  3\n", "default/lost     InvalidSpec            -\n"}},
		{output: "custom-columns=", wantErr: "needs HEADER:.field"},
		{output: "custom-columns=GANG", wantErr: `"GANG" is not HEADER:.field`},
		{output: "jsonpath={.items[", wantErr: "jsonpath"},
		{output: "xml", wantErr: "-o xml"},
	} {
		t.Run(c.output, func(t *testing.T) {
			var out bytes.Buffer
			o := &options{output: c.output, streams: genericiooptions.IOStreams{Out: &out}}
			err := o.printItems("PendingEntry", items, table)
			if c.wantErr != "" {
				assert.ErrorContains(t, err, c.wantErr)
				return
			}
			assert.NoError(t, err)
			for _, want := range c.want {
				assert.Contains(t, out.String(), want)
			}
		})
	}
}

// The help names the command as a user types it (kubectl flotilla, not
// the binary's name), and every command shows an example.
func TestHelpNamesTheCommandAsTypedWithExamples(t *testing.T) {
	root := NewCommand(genericiooptions.IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, "v0.0.0-test")
	commands := append([]*cobra.Command{root}, root.Commands()...)
	for _, cmd := range commands {
		if cmd.Hidden || cmd.Name() == "help" || cmd.Name() == "completion" {
			continue
		}
		t.Run(cmd.Name(), func(t *testing.T) {
			assert.NotEmpty(t, cmd.Example, "an example")
			var out bytes.Buffer
			root := NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &out}, "v0.0.0-test")
			args := []string{"--help"}
			if cmd != commands[0] {
				args = []string{cmd.Name(), "--help"}
			}
			root.SetOut(&out)
			root.SetArgs(args)
			require.NoError(t, root.Execute())
			assert.Contains(t, out.String(), "Usage:\n  kubectl flotilla")
			assert.Contains(t, out.String(), "Examples:\n")
			assert.NotContains(t, out.String(), "kubectl-flotilla")
		})
	}
}

// kubectl completes a plugin's arguments through its __complete command
// (run by kubectl_complete-flotilla): subcommands, and -o's formats.
func TestCompletion(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", ""}, []string{"pending", "queues", "why", "version"}},
		{[]string{"__complete", "pe"}, []string{"pending"}},
		{[]string{"__complete", "pending", "--que"}, []string{"--queue"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			root := NewCommand(genericiooptions.IOStreams{Out: &out, ErrOut: &bytes.Buffer{}}, "v0.0.0-test")
			root.SetOut(&out)
			root.SetArgs(c.args)
			require.NoError(t, root.Execute())
			for _, want := range c.want {
				assert.Contains(t, out.String(), want+"\t", out.String())
			}
		})
	}
}
