package gang

import (
	"fmt"
	"strings"
	"time"

	"github.com/flotilla-sched/flotilla/apis/scheduling/reasons"
	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// gangView is what PreFilter's decision for a gang reads, gathered under
// the store's lock. The fits are computed on demand: most members arrive
// while their gang's attempt is under way and need none.
type gangView struct {
	key state.GroupKey
	// quorumReached: placed and succeeded members reach minMember.
	quorumReached bool
	// attempting: an attempt of the gang is under way.
	attempting bool
	// placing are the other gangs allowed to hold partial reservations
	// (stale ones already finished), by key.
	placing []state.GroupKey
	// mayNotStart says why the gang may not start beside them, or "".
	mayNotStart string
	// backoff is how long the gang still backs off, and backoffWhy why.
	backoff    time.Duration
	backoffWhy string
	// backlog says why the binding backlog holds the gang (pacing.go), or
	// "".
	backlog string
	// preempts: the profile runs gang-aware preemption.
	preempts bool
	// fit places the members still needed for the quorum, on the nodes'
	// free capacity less what the placing gangs hold (besidePlacing) or
	// as if they held nothing.
	fit func(besidePlacing bool) fitOutcome
}

// fitOutcome is a quorum check's answer: why the quorum does not fit (""
// when it does), and where its members went and the domain confining them.
type fitOutcome struct {
	reason string
	plan   []capacity.PlanSlot
	domain []string
	// roleDomains are the nodes of the domain chosen for each role with a
	// topology of its own.
	roleDomains map[string][]string
}

// verdictKind is what PreFilter does with a member.
type verdictKind int

const (
	// placeFreely: the quorum is reached; the member places like a
	// surplus member (inside the required domain its siblings pin).
	placeFreely verdictKind = iota
	// followAttempt: the gang's attempt is under way and admitted it.
	followAttempt
	// waitTurn: refused until one of the placing gangs is done; they
	// record the gang as blocked so their end activates it.
	waitTurn
	// backOff: refused while the gang backs off after a failed attempt.
	backOff
	// waitBindings: refused until the binding backlog drains; the pacer
	// lets it in.
	waitBindings
	// doesNotFit: the quorum does not fit; refused (for preemption to
	// decide, when the profile runs it).
	doesNotFit
	// startAttempt: the quorum fits; the gang starts placing by plan.
	startAttempt
)

// verdict is PreFilter's decision for a member of a gang.
type verdict struct {
	kind verdictKind
	// message says why a refused member waits.
	message string
	// nextTurn: the gang is the one to go when the placing gangs are done
	// (it fits once they have placed, or it needs preemption, which waits
	// for them). Set only with waitTurn.
	nextTurn bool
	// fit is the quorum check that started the attempt or refused it.
	fit fitOutcome
}

// decide is PreFilter's rule for a member of a gang (see doc.go): the
// quorum reached places freely; an attempt under way is followed; beside
// placing gangs a gang waits its turn unless it fits beside them; a gang
// backs off after a failed attempt; none starts while the binding backlog
// is full; otherwise its quorum must fit.
func decide(v gangView) verdict {
	if out, ok := settled(v); ok {
		return out
	}
	fit := v.fit(true)
	if fit.reason != "" && len(v.placing) > 0 {
		alone := v.fit(false)
		switch {
		case alone.reason == "":
			// It fits once the placing gangs have taken what they hold:
			// wait for them rather than preempt or give up.
			return turn(v, fmt.Sprintf("placing gang(s) %s hold the room its quorum needs", keyNames(v.placing)), true)
		case v.preempts:
			// Preemption would evict for it while other gangs hold
			// partial reservations: it has the next turn instead.
			return turn(v, fmt.Sprintf("it needs preemption, which waits until gang(s) %s have placed", keyNames(v.placing)), true)
		}
		// Nothing the placing gangs hold would make it fit.
		fit = alone
	}
	if fit.reason != "" {
		return verdict{kind: doesNotFit, message: fit.reason, fit: fit}
	}
	return verdict{kind: startAttempt, fit: fit}
}

// settled is decide's verdict when it needs no quorum check; ok is false
// when it does.
func settled(v gangView) (out verdict, ok bool) {
	switch {
	case v.quorumReached:
		return verdict{kind: placeFreely}, true
	case v.attempting:
		return verdict{kind: followAttempt}, true
	case v.mayNotStart != "":
		return turn(v, v.mayNotStart, false), true
	case v.backoff > 0:
		return verdict{kind: backOff, message: reasons.BackingOff.Say("gang %s backs off for %s after: %s", v.key, v.backoff.Round(100*time.Millisecond), v.backoffWhy)}, true
	case v.backlog != "":
		return verdict{kind: waitBindings, message: reasons.WaitingForBindings.Say("gang %s waits: %s", v.key, v.backlog)}, true
	}
	return verdict{}, false
}

func turn(v gangView, why string, nextTurn bool) verdict {
	return verdict{kind: waitTurn, message: reasons.WaitingForTurn.Say("gang %s waits its turn: %s", v.key, why), nextTurn: nextTurn}
}

// keyNames lists the gangs' keys for a message, in the order given.
func keyNames(keys []state.GroupKey) string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.String()
	}
	return strings.Join(names, ", ")
}
