// Package cluster runs a real Kubernetes cluster in-process — embedded etcd,
// the real kube-apiserver, optionally the real kube-controller-manager and
// KWOK's simulated kubelets — and flotilla-scheduler against it, started
// through the same options → app.Setup → app.Run path as the binary. The
// playground, the scenario tests (through test/harness, which ties a
// cluster to one test) and the benchmarks all build on it; nothing here
// needs a binary on PATH.
//
// Files by noun: controlplane.go (etcd, the apiserver, clients, CRDs),
// controllermanager.go (the real kube-controller-manager), kubelets.go
// (the kubelet simulator, KWOK, and what a kubelet would do that a test
// triggers: a pod's phase, its end, a kubelet's death, deletion without
// kubelets), scheduler.go, process.go and imageroot.go (flotilla-scheduler
// in this process, as a child process, and as its image runs it),
// objects.go (nodes, pods, PodGroups, Queues, PriorityClasses: builders
// and creators), workloads.go (Jobs and Deployments), apply.go (manifests),
// identity.go (service-account and certificate identities), wait.go
// (polling for what the cluster should come to), metrics.go (scraping),
// podrecorder.go (every pod's life as a watch sees it) and tb.go (a
// testing.TB for a process that is not a test).
//
// It is a product package, not a test one: the playground ships it.
// Anything that needs the testing package lives in test/harness.
//
// The apiserver finds its serving certificates through its source path, so
// a cluster starts under `go test` and `go run`, not in a -trimpath build.
package cluster
