package queues

import (
	"fmt"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/flotilla-sched/flotilla/plugins/state"
)

// partName is the name the queue accounting is kept under on its
// scheduler's Store (state.Shared).
const partName = "queues"

// enabled is a scheduler's queue accounting and the profile whose plugin
// built it, for the error when another profile asks for a different
// default queue.
type enabled struct {
	queues  *Queues
	profile string
}

// Enable returns the scheduler's queue accounting, building it on first
// use, and counts the pods of the given profile as queue members. Every
// profile shares one accounting, so a profile asking for another default
// queue than the one it was built with is refused: its pods would
// silently land in the other queue.
func Enable(s *state.Store, h fwk.Handle, defaultQueue string) (*Queues, error) {
	e, err := state.Shared(s, partName, func() (*enabled, error) {
		q, err := newQueues(s, h, defaultQueue)
		if err != nil {
			return nil, err
		}
		return &enabled{queues: q, profile: h.ProfileName()}, nil
	})
	if err != nil {
		return nil, err
	}
	q := e.queues
	if q.defaultQueue != defaultQueue {
		return nil, fmt.Errorf("defaultQueue %q of profile %q differs from defaultQueue %q of profile %q: the profiles of one scheduler share one queue accounting, so they must name the same default queue",
			defaultQueue, h.ProfileName(), q.defaultQueue, e.profile)
	}
	q.mu.Lock()
	q.profiles[h.ProfileName()] = true
	q.demandChanged = true
	q.mu.Unlock()
	return q, nil
}

// Of returns the queue accounting if a plugin of the store's scheduler
// enabled it, else nil (then every pod is in one implicit queue).
func Of(s *state.Store) *Queues {
	if e, ok := state.Part[*enabled](s, partName); ok {
		return e.queues
	}
	return nil
}
