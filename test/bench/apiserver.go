package bench

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/component-base/metrics/legacyregistry"
)

// This file reads what the in-process apiserver served during a run: on 2
// cores every write a variant adds (a status patch, an event, a
// nomination) is taken from the pace of the Job controller and the
// kubelets, so a scheduler that binds faster can still make Jobs finish
// later.

// apiserverRequests are the requests the in-process apiserver counted
// (apiserver_request_total, kept in this process's registry across runs),
// by "verb resource[/subresource]", for the verbs that write or list.
func apiserverRequests() (map[string]float64, error) {
	gathered, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range gathered {
		if f.GetName() != "apiserver_request_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			verb := label(s, "verb")
			if !countedVerbs[verb] {
				continue
			}
			resource := label(s, "resource")
			if sub := label(s, "subresource"); sub != "" {
				resource += "/" + sub
			}
			out[verb+" "+resource] += s.GetCounter().GetValue()
		}
	}
	return out, nil
}

// countedVerbs: the writes, and LIST (a list from the watch cache still
// costs the apiserver a scan of the resource's objects in the namespace).
var countedVerbs = map[string]bool{
	"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "DELETECOLLECTION": true, "APPLY": true, "LIST": true,
}

// requestsSince is what was counted after before: the total writes, and
// the busiest "verb resource" pairs (at most top), largest first.
func requestsSince(before, now map[string]float64, top int) (writes float64, busiest string) {
	type pair struct {
		key   string
		count float64
	}
	var pairs []pair
	for key, count := range now {
		count -= before[key]
		if count <= 0 {
			continue
		}
		if !strings.HasPrefix(key, "LIST ") {
			writes += count
		}
		pairs = append(pairs, pair{key, count})
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].count != pairs[j].count {
			return pairs[i].count > pairs[j].count
		}
		return pairs[i].key < pairs[j].key
	})
	parts := make([]string, 0, top)
	for i := 0; i < len(pairs) && i < top; i++ {
		parts = append(parts, fmt.Sprintf("%s %.0f", pairs[i].key, pairs[i].count))
	}
	return writes, strings.Join(parts, ", ")
}
