package flotillactl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/util/jsonpath"
)

// The -o formats are kubectl's own: a table (none), wide (the table with
// more columns), name, json, yaml, jsonpath=, jsonpath-as-json=,
// jsonpath-file=, go-template=, go-template-file=, template=,
// templatefile= and custom-columns=. What kubectl flotilla shows is
// computed, not stored, so each row is printed as an object of the group
// cli.flotilla.dev (kind QueueRow, PendingEntry, Explanation, Version)
// in a v1 List, as kubectl prints several objects: a jsonpath or
// custom-columns expression reads its fields, e.g.
// -o jsonpath='{.items[*].name}'.
const printGroupVersion = "cli.flotilla.dev/v1alpha1"

const outputHelp = "output format: empty for a table, wide, name, json, yaml, jsonpath=..., jsonpath-as-json=..., go-template=..., custom-columns=HEADER:.field,..."

// item is one row to print: its value (marshalled as JSON), and the name
// -o name prints for it: TYPE/NAME as kubectl names the object behind it.
type item struct {
	value any
	name  string
}

// printItems prints items as o.output asks; table writes the table, with
// more columns when wide.
func (o *options) printItems(kind string, items []item, table func(w io.Writer, wide bool)) error {
	format, arg, _ := strings.Cut(o.output, "=")
	switch format {
	case "", "wide":
		w := tabwriter.NewWriter(o.streams.Out, 0, 4, 2, ' ', 0)
		table(w, format == "wide")
		return w.Flush()
	case "name":
		seen := map[string]bool{}
		for _, it := range items {
			if !seen[it.name] {
				seen[it.name] = true
				fmt.Fprintln(o.streams.Out, it.name)
			}
		}
		return nil
	case "custom-columns":
		return printColumns(o.streams.Out, arg, items)
	}
	list, err := asList(kind, items)
	if err != nil {
		return err
	}
	flags := genericclioptions.NewPrintFlags("")
	flags.OutputFormat = &o.output
	printer, err := flags.ToPrinter()
	if err != nil {
		return fmt.Errorf("-o %s: %w (or: wide, name, custom-columns=...)", o.output, err)
	}
	return printer.PrintObj(list, o.streams.Out)
}

// asList is the items as objects of a v1 List.
func asList(kind string, items []item) (*unstructured.UnstructuredList, error) {
	list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}}
	for _, it := range items {
		obj, err := asObject(kind, it.value)
		if err != nil {
			return nil, err
		}
		list.Items = append(list.Items, unstructured.Unstructured{Object: obj})
	}
	return list, nil
}

func asObject(kind string, value any) (map[string]any, error) {
	data, err := json.Marshal(value)
	if err != nil {
		return nil, err
	}
	obj := map[string]any{}
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	for _, field := range []string{"apiVersion", "kind"} {
		if _, clash := obj[field]; clash {
			return nil, fmt.Errorf("a %s row has a field %q, which its printed object's type takes", kind, field)
		}
	}
	obj["apiVersion"], obj["kind"] = printGroupVersion, kind
	return obj, nil
}

// printColumns is -o custom-columns=HEADER:JSONPATH[,HEADER:JSONPATH...],
// each path relative to one row, as kubectl's.
func printColumns(out io.Writer, spec string, items []item) error {
	if spec == "" {
		return fmt.Errorf("-o custom-columns= needs HEADER:.field[,HEADER:.field...]")
	}
	var headers []string
	var paths []*jsonpath.JSONPath
	for _, column := range strings.Split(spec, ",") {
		header, path, ok := strings.Cut(column, ":")
		if !ok || header == "" || path == "" {
			return fmt.Errorf("-o custom-columns: %q is not HEADER:.field", column)
		}
		expr := path
		if !strings.HasPrefix(expr, "{") {
			expr = "{" + strings.TrimPrefix(expr, "$") + "}"
		}
		p := jsonpath.New(header).AllowMissingKeys(true)
		if err := p.Parse(expr); err != nil {
			return fmt.Errorf("-o custom-columns: column %s: %w", header, err)
		}
		headers, paths = append(headers, header), append(paths, p)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(headers, "\t"))
	for _, it := range items {
		obj, err := asObject("", it.value)
		if err != nil {
			return err
		}
		cells := make([]string, len(paths))
		for i, p := range paths {
			var b strings.Builder
			if err := p.Execute(&b, obj); err != nil {
				return err
			}
			cells[i] = dash(b.String())
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	return w.Flush()
}
