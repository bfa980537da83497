package state

import (
	"context"
	"sync"

	"k8s.io/client-go/informers"
	fwk "k8s.io/kube-scheduler/framework"
)

// registry holds one Store per scheduler running in the process. Every
// profile of one scheduler shares its informer factory, which is the key;
// each Store keeps the per-scheduler parts the plugins enable (queue
// accounting, gang-aware preemption, Shared parts), so there is one entry
// to build and one to forget.
var registry = struct {
	sync.Mutex
	stores map[informers.SharedInformerFactory]*Store
}{stores: map[informers.SharedInformerFactory]*Store{}}

// parts are what plugins enable on their scheduler's Store. Guarded by
// Store.partsMu.
type parts struct {
	// shared are plugin parts that exist once per scheduler (see Shared).
	shared map[string]any
}

// For returns the Store of the scheduler that owns h, building it on first
// use. It is forgotten when ctx (the scheduler's) ends.
func For(ctx context.Context, h fwk.Handle) (*Store, error) {
	registry.Lock()
	defer registry.Unlock()
	factory := h.SharedInformerFactory()
	if s, ok := registry.stores[factory]; ok {
		return s, nil
	}
	s, err := newStore(h)
	if err != nil {
		return nil, err
	}
	registry.stores[factory] = s
	go runFailed(ctx, s.failed)
	go func() {
		<-ctx.Done()
		registry.Lock()
		delete(registry.stores, factory)
		registry.Unlock()
	}()
	return s, nil
}

// Shared returns the part of a plugin named name that must exist once per
// scheduler however many profiles run the plugin — informer handlers,
// status writers — building it with build on first use. When
// kube-scheduler serves two profiles that both run a plugin, it builds the
// plugin twice; what hangs off the scheduler's informers must not be
// doubled with it.
func Shared[T any](s *Store, name string, build func() (T, error)) (T, error) {
	s.partsMu.Lock()
	defer s.partsMu.Unlock()
	if part, ok := s.parts.shared[name]; ok {
		return part.(T), nil
	}
	part, err := build()
	if err != nil {
		return part, err
	}
	if s.parts.shared == nil {
		s.parts.shared = map[string]any{}
	}
	s.parts.shared[name] = part
	return part, nil
}

// Part returns the part named name if one was built (Shared) or set
// (SetPart).
func Part[T any](s *Store, name string) (T, bool) {
	s.partsMu.Lock()
	defer s.partsMu.Unlock()
	part, ok := s.parts.shared[name].(T)
	return part, ok
}

// SetPart makes part the one named name: for stores not connected to an
// apiserver (NewStatic), whose parts tests build.
func SetPart(s *Store, name string, part any) {
	s.partsMu.Lock()
	defer s.partsMu.Unlock()
	if s.parts.shared == nil {
		s.parts.shared = map[string]any{}
	}
	s.parts.shared[name] = part
}

// Profiles are a set of the scheduler's profiles.
type Profiles struct {
	mu    sync.Mutex
	names map[string]bool
}

// Add adds a profile to the set.
func (p *Profiles) Add(profile string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.names == nil {
		p.names = map[string]bool{}
	}
	p.names[profile] = true
}

// Has reports whether the set holds profile.
func (p *Profiles) Has(profile string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.names[profile]
}

// GangPreemption are the profiles that run a gang-aware preemption
// plugin, to which Gang may leave a gang that does not fit instead of
// refusing it outright.
func (s *Store) GangPreemption() *Profiles { return &s.gangPreemption }
