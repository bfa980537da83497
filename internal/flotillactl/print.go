package flotillactl

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
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

// column is one column of a command's table: its header, whether only -o
// wide shows it, and its cell in a row.
type column[T any] struct {
	header string
	wide   bool
	cell   func(T) any
}

// tableFlags are kubectl get's flags for what a command prints as a
// table: --no-headers, and --sort-by over the printed objects (every
// format, as kubectl's).
type tableFlags struct {
	noHeaders bool
	sortBy    string
}

func (f *tableFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.noHeaders, "no-headers", false, "print the table (and custom-columns) without the header row")
	cmd.Flags().StringVar(&f.sortBy, "sort-by", "", "sort by a field of the printed objects, a JSONPath expression as kubectl get's: '{.priority}' or .since")
}

// printRows prints rows as o.output asks: with none or wide, as a table
// of columns through cli-runtime's table printer (the wide columns with
// wide only); sorted first by --sort-by.
func printRows[T any](o *options, f tableFlags, kind string, rows []T, name func(T) string, columns []column[T]) error {
	items := make([]item, len(rows))
	for i, r := range rows {
		items[i] = item{value: r, name: name(r)}
	}
	order, err := sortedOrder(items, f.sortBy)
	if err != nil {
		return err
	}
	sortedRows, sortedItems := make([]T, len(order)), make([]item, len(order))
	for i, at := range order {
		sortedRows[i], sortedItems[i] = rows[at], items[at]
	}
	format, _, _ := strings.Cut(o.output, "=")
	if format != "" && format != "wide" {
		return o.printItems(kind, sortedItems, f.noHeaders, nil)
	}
	if len(rows) == 0 {
		// As kubectl get: the table printer prints no header over no
		// rows, and the absence is said on stderr, leaving stdout empty
		// for scripts.
		if o.streams.ErrOut != nil {
			fmt.Fprintf(o.streams.ErrOut, "No %s found.\n", kindPlural[kind])
		}
		return nil
	}
	table := &metav1.Table{}
	for _, c := range columns {
		definition := metav1.TableColumnDefinition{Name: c.header, Type: "string"}
		if c.wide {
			definition.Priority = 1
		}
		table.ColumnDefinitions = append(table.ColumnDefinitions, definition)
	}
	for _, r := range sortedRows {
		cells := make([]any, len(columns))
		for i, c := range columns {
			cells[i] = c.cell(r)
		}
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells})
	}
	printer := printers.NewTablePrinter(printers.PrintOptions{NoHeaders: f.noHeaders, Wide: format == "wide"})
	return printer.PrintObj(table, o.streams.Out)
}

// kindPlural names a printed kind's rows where none were found.
var kindPlural = map[string]string{"QueueRow": "queues", "PendingEntry": "pending gangs or pods"}

// printItems prints items as o.output asks, but for the table: a command
// whose table is prose (why, version) gives text, which writes it.
func (o *options) printItems(kind string, items []item, noHeaders bool, text func(w io.Writer)) error {
	format, arg, _ := strings.Cut(o.output, "=")
	switch format {
	case "", "wide":
		if text == nil {
			return fmt.Errorf("-o %s: no table for %s", o.output, kind)
		}
		w := tabwriter.NewWriter(o.streams.Out, 0, 4, 2, ' ', 0)
		text(w)
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
		return printColumns(o.streams.Out, arg, items, noHeaders)
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

// sortedOrder is the order of items by the value expr (a JSONPath, as
// kubectl get's --sort-by: braces and the leading dot optional) finds in
// each: numbers by value, quantities (1500m, 2Gi) by amount, times by
// instant, other strings naturally (gpu-2 before gpu-10), false before
// true; an item without the field first. Equal items keep their order.
// No expression keeps the order.
func sortedOrder(items []item, expr string) ([]int, error) {
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	if expr == "" {
		return order, nil
	}
	path, err := relaxedJSONPath(expr)
	if err != nil {
		return nil, fmt.Errorf("--sort-by %s: %w", expr, err)
	}
	p := jsonpath.New("sort-by").AllowMissingKeys(true)
	if err := p.Parse(path); err != nil {
		return nil, fmt.Errorf("--sort-by %s: %w", expr, err)
	}
	values := make([]any, len(items))
	var found bool
	for i, it := range items {
		obj, err := asObject("", it.value)
		if err != nil {
			return nil, err
		}
		results, err := p.FindResults(obj)
		if err != nil {
			return nil, fmt.Errorf("--sort-by %s: %w", expr, err)
		}
		if len(results) > 0 && len(results[0]) > 0 {
			values[i], found = results[0][0].Interface(), true
		}
	}
	if !found && len(items) > 0 {
		return nil, fmt.Errorf("--sort-by %s: no printed object has this field (see -o json for the fields)", expr)
	}
	sort.SliceStable(order, func(a, b int) bool { return sortsBefore(values[order[a]], values[order[b]]) })
	return order, nil
}

// sortsBefore is sortedOrder's comparison of two found values (nil: not
// found).
func sortsBefore(a, b any) bool {
	switch {
	case a == nil || b == nil:
		return a == nil && b != nil
	}
	switch x := a.(type) {
	case float64:
		if y, ok := b.(float64); ok {
			return x < y
		}
	case bool:
		if y, ok := b.(bool); ok {
			return !x && y
		}
	case string:
		y, ok := b.(string)
		if !ok {
			break
		}
		if tx, err := time.Parse(time.RFC3339, x); err == nil {
			if ty, err := time.Parse(time.RFC3339, y); err == nil {
				return tx.Before(ty)
			}
		}
		if qx, err := resource.ParseQuantity(x); err == nil {
			if qy, err := resource.ParseQuantity(y); err == nil {
				return qx.Cmp(qy) < 0
			}
		}
		return naturalLess(x, y)
	}
	return fmt.Sprint(a) < fmt.Sprint(b)
}

// naturalLess compares strings with their runs of digits by value:
// gpu-2 before gpu-10.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := leadingDigits(a), leadingDigits(b)
		if da != "" && db != "" {
			na, nb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// relaxedJSONPath is expr as a JSONPath template, as kubectl reads
// --sort-by and custom-columns: {.a.b}, .a.b and a.b are the same.
func relaxedJSONPath(expr string) (string, error) {
	inner := strings.TrimSpace(expr)
	if strings.HasPrefix(inner, "{") != strings.HasSuffix(inner, "}") {
		return "", fmt.Errorf("unbalanced braces in %q", expr)
	}
	inner = strings.TrimSuffix(strings.TrimPrefix(inner, "{"), "}")
	inner = strings.TrimPrefix(inner, "$")
	if inner == "" {
		return "", fmt.Errorf("an empty path")
	}
	if !strings.HasPrefix(inner, ".") && !strings.HasPrefix(inner, "[") {
		inner = "." + inner
	}
	return "{" + inner + "}", nil
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
func printColumns(out io.Writer, spec string, items []item, noHeaders bool) error {
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
		expr, err := relaxedJSONPath(path)
		if err != nil {
			return fmt.Errorf("-o custom-columns: column %s: %w", header, err)
		}
		p := jsonpath.New(header).AllowMissingKeys(true)
		if err := p.Parse(expr); err != nil {
			return fmt.Errorf("-o custom-columns: column %s: %w", header, err)
		}
		headers, paths = append(headers, header), append(paths, p)
	}
	w := printers.GetNewTabWriter(out) // kubectl's spacing
	if !noHeaders {
		fmt.Fprintln(w, strings.Join(headers, "\t"))
	}
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
