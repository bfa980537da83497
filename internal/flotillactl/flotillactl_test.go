package flotillactl

import (
	"bytes"
	"fmt"
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

// Every -o format kubectl's commands take, with --no-headers and
// --sort-by, on the rows of one command.
func TestPrintFormats(t *testing.T) {
	since := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	entries := []PendingEntry{
		{Queue: "team", Position: 1, Kind: "gang", Name: "default/too-big", Priority: 10, Since: since, Pending: 3, MinMember: 3, Reasons: []string{"InsufficientResources"}, Message: "does not fit"},
		{Queue: "team", Position: 2, Kind: "pod", Name: "default/lost", Priority: 2, Since: since.Add(-time.Hour), Pending: 1, Reasons: []string{"InvalidSpec"}, Message: "no queue"},
	}
	columns := []column[PendingEntry]{
		{header: "Name", cell: func(e PendingEntry) any { return e.Name }},
		{header: "Reason", cell: func(e PendingEntry) any { return e.Reasons[0] }},
		{header: "Min", wide: true, cell: func(e PendingEntry) any { return e.MinMember }},
	}
	for _, c := range []struct {
		output    string
		noHeaders bool
		sortBy    string
		want      string // the whole output
		contains  []string
		wantErr   string
	}{
		{output: "", want: "NAME              REASON\ndefault/too-big   InsufficientResources\ndefault/lost      InvalidSpec\n"},
		{output: "", noHeaders: true, want: "default/too-big   InsufficientResources\ndefault/lost      InvalidSpec\n"},
		{output: "wide", want: "NAME              REASON                  MIN\ndefault/too-big   InsufficientResources   3\ndefault/lost      InvalidSpec             0\n"},
		{output: "", sortBy: ".priority", want: "NAME              REASON\ndefault/lost      InvalidSpec\ndefault/too-big   InsufficientResources\n"},
		{output: "name", sortBy: "{.since}", want: "pod/lost\npodgroup/too-big\n"},
		{output: "name", want: "podgroup/too-big\npod/lost\n"},
		{output: "json", contains: []string{`"kind": "List"`, `"kind": "PendingEntry"`, `"apiVersion": "cli.flotilla.dev/v1alpha1"`, `"name": "default/too-big"`, `"minMember": 3`}},
		{output: "yaml", contains: []string{"kind: List", "- apiVersion: cli.flotilla.dev/v1alpha1", "  name: default/lost"}},
		{output: "jsonpath={.items[*].name}", want: "default/too-big default/lost"},
		{output: "jsonpath={.items[*].name}", sortBy: "name", want: "default/lost default/too-big"},
		{output: "jsonpath-as-json={.items[0].reasons}", contains: []string{`"InsufficientResources"`}},
		{output: "go-template={{range .items}}{{.queue}}:{{.position}} {{end}}", want: "team:1 team:2 "},
		{output: "custom-columns=GANG:.name,WHY:.reasons[0],MIN:.minMember", want: "GANG              WHY                     MIN\ndefault/too-big   InsufficientResources   3\ndefault/lost      InvalidSpec             -\n"},
		{output: "custom-columns=GANG:name", noHeaders: true, want: "default/too-big\ndefault/lost\n"},
		{output: "custom-columns=", wantErr: "needs HEADER:.field"},
		{output: "custom-columns=GANG", wantErr: `"GANG" is not HEADER:.field`},
		{output: "jsonpath={.items[", wantErr: "jsonpath"},
		{output: "xml", wantErr: "-o xml"},
		{output: "", sortBy: ".nothing", wantErr: "--sort-by .nothing: no printed object has this field"},
		{output: "", sortBy: "{.name", wantErr: "unbalanced braces"},
	} {
		t.Run(fmt.Sprintf("%s,no-headers=%t,sort-by=%s", c.output, c.noHeaders, c.sortBy), func(t *testing.T) {
			var out bytes.Buffer
			o := &options{output: c.output, streams: genericiooptions.IOStreams{Out: &out, ErrOut: &bytes.Buffer{}}}
			err := printRows(o, tableFlags{noHeaders: c.noHeaders, sortBy: c.sortBy}, "PendingEntry", entries, func(e PendingEntry) string { return objectName(e.Kind, e.Name) }, columns)
			if c.wantErr != "" {
				assert.ErrorContains(t, err, c.wantErr)
				return
			}
			require.NoError(t, err)
			if c.want != "" {
				assert.Equal(t, c.want, out.String())
			}
			for _, want := range c.contains {
				assert.Contains(t, out.String(), want)
			}
		})
	}
}

// No rows: nothing on stdout, and kubectl get's words on stderr.
func TestPrintNoRows(t *testing.T) {
	var out, errOut bytes.Buffer
	o := &options{streams: genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}}
	require.NoError(t, printRows(o, tableFlags{}, "QueueRow", nil, func(r QueueRow) string { return r.Queue }, queueColumns(true)))
	assert.Empty(t, out.String())
	assert.Equal(t, "No queues found.\n", errOut.String())
}

// --sort-by's order: numbers by value, quantities by amount, times by
// instant, strings naturally, false before true, the missing first, and
// equal ones as they came.
func TestSortedOrder(t *testing.T) {
	type row struct {
		Name  string `json:"name"`
		N     *int   `json:"n,omitempty"`
		Q     string `json:"q,omitempty"`
		T     string `json:"t,omitempty"`
		Valid bool   `json:"valid"`
	}
	n := func(v int) *int { return &v }
	rows := []row{
		{Name: "gpu-10", N: n(10), Q: "2Gi", T: "2026-11-01T10:00:00Z", Valid: true},
		{Name: "gpu-2", N: n(2), Q: "1500m", T: "2026-11-01T09:00:00+02:00"},
		{Name: "gpu-9", Q: "3", T: "2026-11-01T09:30:00Z", Valid: true},
		{Name: "cpu-2", N: n(2), Q: "500Mi", T: "2026-10-31T23:00:00Z"},
	}
	items := make([]item, len(rows))
	for i, r := range rows {
		items[i] = item{value: r, name: r.Name}
	}
	for _, c := range []struct {
		sortBy string
		want   []string
	}{
		{sortBy: "", want: []string{"gpu-10", "gpu-2", "gpu-9", "cpu-2"}},
		{sortBy: ".name", want: []string{"cpu-2", "gpu-2", "gpu-9", "gpu-10"}},
		{sortBy: "{.n}", want: []string{"gpu-9", "gpu-2", "cpu-2", "gpu-10"}},
		{sortBy: "q", want: []string{"gpu-2", "gpu-9", "cpu-2", "gpu-10"}},
		{sortBy: ".t", want: []string{"cpu-2", "gpu-2", "gpu-9", "gpu-10"}},
		{sortBy: "$.valid", want: []string{"gpu-2", "cpu-2", "gpu-10", "gpu-9"}},
	} {
		t.Run(c.sortBy, func(t *testing.T) {
			order, err := sortedOrder(items, c.sortBy)
			require.NoError(t, err)
			var got []string
			for _, at := range order {
				got = append(got, items[at].name)
			}
			assert.Equal(t, c.want, got)
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
