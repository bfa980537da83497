package gang

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/flotilla-sched/flotilla/plugins/state"
	"github.com/flotilla-sched/flotilla/plugins/state/capacity"
)

// decide is PreFilter's rule for a gang's member, over what the store
// shows (gangView), without a framework or a store.
func TestDecide(t *testing.T) {
	key := state.GroupKey{Namespace: "ns", Name: "g"}
	other := state.GroupKey{Namespace: "ns", Name: "other"}
	fits := fitOutcome{plan: []capacity.PlanSlot{{Node: "n1", Members: 2}}, domain: []string{"n1"}}
	tooBig := fitOutcome{reason: "gang ns/g does not fit"}
	tests := []struct {
		name string
		view gangView
		// fitBeside and fitAlone are the quorum checks with and without the
		// room placing gangs hold; nil fails the test if decide asks for it.
		fitBeside, fitAlone *fitOutcome
		want                verdictKind
		wantNextTurn        bool
		wantMessage         string
		wantPlan            bool
	}{
		{name: "quorum reached: places freely, no fit check",
			view: gangView{quorumReached: true, attempting: true, mayNotStart: "x", backoff: time.Second, backlog: "x"}, want: placeFreely},
		{name: "attempt under way: follows it whatever the binding backlog, no fit check",
			view: gangView{attempting: true, mayNotStart: "x", backoff: time.Second, backlog: "x"}, want: followAttempt},
		{name: "may not start beside the placing gangs: waits, not the next turn",
			view: gangView{placing: []state.GroupKey{other}, mayNotStart: "gang ns/other is placing off its plan", backoff: time.Second},
			want: waitTurn, wantMessage: "gang ns/g waits its turn: gang ns/other is placing off its plan"},
		{name: "backing off",
			view: gangView{backoff: 1234 * time.Millisecond, backoffWhy: "timeout"},
			want: backOff, wantMessage: "gang ns/g backs off for 1.2s after: timeout"},
		{name: "binding backlog full: waits for bindings, no fit check",
			view: gangView{backlog: "96 or more members of gangs are placed and not yet bound"},
			want: waitBindings, wantMessage: "WaitingForBindings: gang ns/g waits: 96 or more members"},
		{name: "backing off and the backlog full: backs off (its activation is due anyway)",
			view: gangView{backoff: time.Second, backoffWhy: "timeout", backlog: "x"}, want: backOff, wantMessage: "backs off"},
		{name: "fits: starts its attempt with the plan",
			view: gangView{}, fitBeside: &fits, want: startAttempt, wantPlan: true},
		{name: "fits beside the placing gangs: starts",
			view: gangView{placing: []state.GroupKey{other}}, fitBeside: &fits, want: startAttempt, wantPlan: true},
		{name: "fits only once the placing gangs are done: next turn",
			view: gangView{placing: []state.GroupKey{other}}, fitBeside: &tooBig, fitAlone: &fits,
			want: waitTurn, wantNextTurn: true, wantMessage: "placing gang(s) ns/other hold the room its quorum needs"},
		{name: "needs preemption while others place: next turn",
			view: gangView{placing: []state.GroupKey{other}, preempts: true}, fitBeside: &tooBig, fitAlone: &tooBig,
			want: waitTurn, wantNextTurn: true, wantMessage: "it needs preemption, which waits until gang(s) ns/other have placed"},
		{name: "does not fit even alone, no preemption: refused",
			view: gangView{placing: []state.GroupKey{other}}, fitBeside: &tooBig, fitAlone: &tooBig,
			want: doesNotFit, wantMessage: "does not fit"},
		{name: "does not fit, nobody placing: refused without a second check",
			view: gangView{preempts: true}, fitBeside: &tooBig, want: doesNotFit, wantMessage: "does not fit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.view
			v.key = key
			v.fit = func(besidePlacing bool) fitOutcome {
				f := tt.fitAlone
				if besidePlacing {
					f = tt.fitBeside
				}
				if f == nil {
					t.Fatalf("decide asked for a fit (beside placing gangs: %v) it must not need", besidePlacing)
				}
				return *f
			}
			got := decide(v)
			assert.Equal(t, tt.want, got.kind)
			assert.Equal(t, tt.wantNextTurn, got.nextTurn)
			assert.True(t, strings.Contains(got.message, tt.wantMessage), "message %q, want it to contain %q", got.message, tt.wantMessage)
			if tt.wantMessage == "" {
				assert.Empty(t, got.message)
			}
			assert.Equal(t, tt.wantPlan, len(got.fit.plan) > 0)
		})
	}
}
