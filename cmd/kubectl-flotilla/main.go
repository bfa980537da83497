// Command kubectl-flotilla is the kubectl plugin `kubectl flotilla`: the
// queue tree with each queue's shares (queues), the pending gangs and pods
// per queue in the order the scheduler takes them (pending), and why a
// pod waits, found through any owner (why), and its version. Put it on the PATH (make
// kubectl-flotilla builds it into bin/) and run
// `kubectl flotilla why job NAME -n NAMESPACE`.
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/flotilla-sched/flotilla/internal/flotillactl"
)

// version is stamped at build time (-ldflags "-X main.version=...").
var version = ""

func main() {
	cmd := flotillactl.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, version)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
