package state

import (
	"fmt"
	"strings"
)

// Workload is a gang or a pod as a message names it.
type Workload struct {
	// Kind is "gang" or "pod".
	Kind string
	// Namespace is the gang's or the pod's; Name is how a message prints
	// it, namespace included (a native group's with its source).
	Namespace, Name string
}

func (w Workload) String() string { return w.Kind + " " + w.Name }

// SeenFrom is how a message that the readers of namespace reader may see
// names the workload: by name when it is of that namespace, else only as
// a gang or pod of another namespace. Queues are cluster-scoped and shared
// by tenants, while a pod's conditions and events are read by whoever may
// read its namespace: a tenant's messages never carry another tenant's
// workload names.
func (w Workload) SeenFrom(reader string) string {
	if w.Namespace == reader {
		return w.String()
	}
	return "a " + w.Kind + " of another namespace"
}

// WorkloadsSeenFrom names several workloads in one message that the
// readers of namespace reader may see: those of that namespace by name,
// in order, the others by their count.
func WorkloadsSeenFrom(reader string, workloads []Workload) string {
	var named []string
	others := 0
	for _, w := range workloads {
		if w.Namespace == reader {
			named = append(named, w.String())
		} else {
			others++
		}
	}
	switch {
	case others == 1:
		named = append(named, "1 of another namespace")
	case others > 1:
		named = append(named, fmt.Sprintf("%d of other namespaces", others))
	}
	return strings.Join(named, ", ")
}
