// Package cluster runs a real Kubernetes cluster in-process — embedded etcd,
// the real kube-apiserver, optionally the real kube-controller-manager and
// KWOK's simulated kubelets — and flotilla-scheduler against it, started
// through the same options → app.Setup → app.Run path as the binary. The
// playground, the scenario tests (through test/harness, which ties a
// cluster to one test) and the benchmarks all build on it; nothing here
// needs a binary on PATH.
//
// It is a product package, not a test one: the playground ships it.
// Anything that needs the testing package lives in test/harness.
//
// The apiserver finds its serving certificates through its source path, so
// a cluster starts under `go test` and `go run`, not in a -trimpath build.
package cluster
