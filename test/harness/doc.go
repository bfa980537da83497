// Package harness runs a real Kubernetes control plane in-process — embedded
// etcd plus the real kube-apiserver — and flotilla-scheduler against it,
// started through the same options → app.Setup → app.Run path as the binary.
// Scenario tests, benchmarks and the playground all build on it; nothing here
// needs a binary on PATH.
//
// There is no kubelet: the harness creates Node objects with whatever
// capacity a test asks for (extended resources included) and moves bound
// pods to Running or Succeeded itself when a test needs pod status.
//
// The apiserver finds its serving certificates through its source path, so
// the harness works under `go test` and `go run`, not in a -trimpath build.
package harness
