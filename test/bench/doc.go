// Package bench measures flotilla against the default profile on the same
// workloads, side by side in one run, through the real-apiserver harness:
// scheduling throughput (P1, and S1 at three times its nodes), gangs at
// scale (P2, S2 at five times its nodes, P3; P3 also against the same gang
// under kube-scheduler's in-tree gang scheduling of native PodGroups),
// memory with many pending pods (P4), gang waves (Q1), queue fairness with
// reclaim (Q2), a hierarchy of over 50 queues under load (H1), a large
// gang under a stream of small work (G1, G2),
// fairness over time with usage on and off (F1: queues arriving one after
// another, mixed gangs among them; Jain's index per window, deviation from
// deserved, time to a fair share, longest wait, evictions per cpu-hour),
// topology-aware gangs (T1: gangs preferring one rack, against the same
// stream without annotations), devices through DRA (D1) and gangs with
// roles (R1: P2's Jobs as a leader and workers, against the same gangs
// without roles), and mixed gangs (M1: disaggregated serving on DRA,
// prefill and decode claiming different device models, each role required
// in one zone, against the same pods on the default profile).
//
// The gang workloads that scheduler-plugins' Coscheduling can express (P2,
// S2, P3, Q1, G1, G2) also run it, the peer: scheduler-plugins v0.34.7's
// kube-scheduler built in test/bench/coscheduling's module graph of its
// own (kube-scheduler 1.34's framework against the 1.37 apiserver, outside
// Kubernetes' supported skew), with its documented Coscheduling profile
// and the shipped client limits, on the same PodGroups. R1, D1 and M1 say
// why it cannot run them (roles, DRA across the skew).
//
// Each run gets a fresh control plane and its scheduler as a process of its
// own, so the scheduler's RSS is its own: for flotilla's variants the real
// flotilla-scheduler binary, serving both profiles from one configuration
// (the replace-default one); for the default profile's, upstream's
// kube-scheduler built from k8s.io/kubernetes at the version flotilla
// builds against, with its default profile alone and the shipped client
// limits and feature gates (no flotilla code in its process: no informers
// of PodGroups or Queues, no queue accounting). P2, R1, D1, M1, Q1, Q2, F1 and T1 are Jobs on the
// realistic substrate (the Job and garbage-collector controllers, and KWOK
// kubelets that run each pod for its run time): their pods are created by
// the Job controller, run and finish, and gangs free their nodes by
// finishing. P1, P3 and P4 schedule bare pods that never run. The time
// measured is from the first pod (or Job) created to the last pod bound;
// the scheduler's own metrics give
// latency percentiles and the time spent scheduling and binding. With
// -bench.kubeconfig the workloads run against an existing control plane
// instead (for example `make playground ARGS=--no-scheduler`) and a
// scheduler of your choice, named by -bench.scheduler-name.
//
// Files: env.go (one run's set-up: control plane, scheduler, nodes, pods),
// profile.go (CPU and allocation profiles, peak RSS), workloads.go,
// jobs.go, topology.go, mixed.go, hierarchy.go, largegang.go and
// fairness.go (the workloads), metrics.go (the scheduler's own metrics),
// status.go (verdicts and noise bands), report.go (the tables), plots.go
// (the SVGs in docs/plots). Pod timings come from
// cluster.PodRecorder, the recorder the scenario tests use too.
//
// `make bench` runs the full sizes and rewrites the table in
// docs/benchmarks.md; the smoke size runs in `make test` and checks only
// that every workload completes and every number is measured.
package bench
