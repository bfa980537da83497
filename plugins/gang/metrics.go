package gang

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	// gangWaitSeconds: from a gang's attempt starting to its quorum being
	// placed, i.e. how long its first members held nodes waiting. Buckets
	// from 1 ms: a small gang on an idle cluster places in a few
	// milliseconds, the scale of the in-tree gang benchmarks.
	gangWaitSeconds = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "flotilla", Name: "gang_wait_seconds",
		Help:           "Time from a gang's placing attempt starting to its quorum being placed.",
		Buckets:        metrics.ExponentialBuckets(0.001, 2, 20),
		StabilityLevel: metrics.ALPHA,
	})
	// queueAdmissionSeconds: from a gang's PodGroup being created to its
	// quorum placed and let through Permit to bind, per queue: how long a
	// queue's tenants wait for their gangs to start, whatever held them
	// (members not yet created, the queue's share, room, preemption).
	// Buckets from 0.1 s to about 7 hours.
	queueAdmissionSeconds = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "flotilla", Name: "queue_admission_wait_seconds",
		Help:           "Time from a gang's PodGroup creation to its quorum placed and sent to bind, by the gang's queue (empty without queues).",
		Buckets:        metrics.ExponentialBuckets(0.1, 2, 18),
		StabilityLevel: metrics.ALPHA,
	}, []string{"queue"})
	// gangRejections counts failed attempts by why they failed.
	gangRejections = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "flotilla", Name: "gang_rejections_total",
		Help:           "Gang placing attempts that failed or were refused, by reason (does_not_fit, member_unplaceable, lost_place, timed_out).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	// podGroupStatusWrites counts PodGroup status patches: one per change
	// of a group's status, whatever the number of profiles.
	podGroupStatusWrites = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "flotilla", Name: "podgroup_status_writes_total",
		Help:           "PodGroup status patches written by the scheduler.",
		StabilityLevel: metrics.ALPHA,
	})
	// podGroupMemberLists counts the lists of a PodGroup's pods the status
	// writer made because the informers could not account for every
	// member (state.Store.MembersAsListed): a few per scheduler start,
	// and one per status write of a gang with a failed member.
	podGroupMemberLists = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "flotilla", Name: "podgroup_member_lists_total",
		Help:           "Lists of a PodGroup's pods from the apiserver made by the status writer, which otherwise counts the members from its informers, by reason (untracked, older_than_tracking, member_left_unseen).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	// podGroupWaitingWrites counts the patches of PodGroups' waiting
	// annotations: one each time a gang starts waiting, its reason or
	// message changes, or it stops waiting.
	podGroupWaitingWrites = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "flotilla", Name: "podgroup_waiting_writes_total",
		Help:           "PodGroup waiting-reason annotation patches written by the scheduler.",
		StabilityLevel: metrics.ALPHA,
	})
	// podGroupsByPhase and gangLongestWait are set by the survey of every
	// PodGroup (survey.go), on the replica that writes statuses.
	podGroupsByPhase = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "podgroups",
		Help:           "PodGroups by status phase (Pending, Scheduling, Scheduled, Running, Finished, Failed).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"phase"})
	// gangMembersInFlight and gangsPaced show the pacing by the binding
	// backlog (pacing.go): how many members are placed and not yet bound,
	// and how often a gang's attempt was held for it.
	gangMembersInFlight = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "gang_members_in_flight",
		Help:           "Members of gangs placed and not yet bound (waiting in Permit or binding), measured every 100 ms.",
		StabilityLevel: metrics.ALPHA,
	})
	gangsPaced = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "flotilla", Name: "gang_attempts_paced_total",
		Help:           "Gang attempts held because maxMembersInFlight members of gangs were placed and not yet bound.",
		StabilityLevel: metrics.ALPHA,
	})
	// quorumCheckSeconds and quorumChecksOvertaken show the quorum checks
	// (prefilter.go), made without the store's lock: how long one takes,
	// and how often the accounting changed under one so that it was
	// made again.
	quorumCheckSeconds = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "flotilla", Name: "gang_quorum_check_seconds",
		Help:           "Time one gang quorum check (placing the members its quorum still needs, member by member) took.",
		Buckets:        metrics.ExponentialBuckets(0.0001, 2, 18),
		StabilityLevel: metrics.ALPHA,
	})
	quorumChecksOvertaken = metrics.NewCounter(&metrics.CounterOpts{
		Namespace: "flotilla", Name: "gang_quorum_checks_overtaken_total",
		Help:           "Gang quorum checks whose verdict was dropped because the gangs' accounting changed while they ran.",
		StabilityLevel: metrics.ALPHA,
	})
	// reservationsHeld and reservationSeconds show the room held for
	// gangs that do not fit now (reservation.go): how many gangs hold
	// room, and how long a reservation lasted, from its first plan to its
	// end (the quorum placed, the gang deleted or no longer admitted).
	reservationsHeld = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "gang_reservations",
		Help:           "Gangs holding room for their quorum until running pods end.",
		StabilityLevel: metrics.ALPHA,
	})
	reservationSeconds = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "flotilla", Name: "gang_reservation_seconds",
		Help:           "Time a gang held room, from its reservation to its quorum placed (or the gang deleted or no longer admitted).",
		Buckets:        metrics.ExponentialBuckets(0.5, 2, 14),
		StabilityLevel: metrics.ALPHA,
	})
	// reservationIdle is what held room cost: per resource, the held
	// amount that was free and kept from other pods, integrated over time.
	reservationIdle = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "flotilla", Name: "gang_reservation_idle_resource_seconds_total",
		Help:           "Room held for gangs that was free and kept from other pods, by resource, in the resource's units times seconds (cpu in millicores).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})
	gangLongestWait = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace: "flotilla", Name: "gang_longest_wait_timeouts",
		Help:           "The longest wait of a gang with all its members but not its quorum bound, from its oldest unbound member's creation, in multiples of that gang's schedule timeout.",
		StabilityLevel: metrics.ALPHA,
	})
)

// Reasons a gang attempt ends without its quorum.
const (
	reasonDoesNotFit        = "does_not_fit"
	reasonMemberUnplaceable = "member_unplaceable"
	reasonLostPlace         = "lost_place"
	reasonTimedOut          = "timed_out"
)

// registerMetrics registers the plugin's metrics with the scheduler's
// registry, once however many profiles build the plugin.
var registerMetrics = sync.OnceFunc(func() {
	legacyregistry.MustRegister(gangWaitSeconds, queueAdmissionSeconds, gangRejections, podGroupStatusWrites, podGroupMemberLists, podGroupWaitingWrites, podGroupsByPhase, gangLongestWait, gangMembersInFlight, gangsPaced, quorumCheckSeconds, quorumChecksOvertaken, reservationsHeld, reservationSeconds, reservationIdle)
	// Every reason's series exists from the start, at 0: a rate over a
	// series that appears with its first increment misses that increment.
	for _, reason := range []string{reasonDoesNotFit, reasonMemberUnplaceable, reasonLostPlace, reasonTimedOut} {
		gangRejections.WithLabelValues(reason)
	}
	// Every hold holds cpu and memory: their idle series exist from the
	// start too (a device's appears with the first hold of it).
	for _, resource := range []string{"cpu", "memory"} {
		reservationIdle.WithLabelValues(resource)
	}
})
