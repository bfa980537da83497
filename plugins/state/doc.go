// Package state is the one view of batch workloads that every flotilla
// plugin of a scheduler reads: PodGroups (the scheduler-plugins CRD) with
// their member pods, and the gangs' in-flight accounting (which members are
// reserved, which gangs are placing and what room their plans hold, which
// are backing off) that Reserve/Unreserve keep exact. It is built once per scheduler from its
// informers, however many profiles and plugins use it; policies meet here
// instead of importing each other.
//
// The rules several plugins need have their owner here: a gang's quorum
// counts its placed and its succeeded members (quorum.go; the scheduler's
// own pod informer drops finished pods, so succeeded members are watched
// separately, metadata only); the queues' accounting, deserved shares and
// admission (queues.go, fairshare.go, admission.go).
package state
