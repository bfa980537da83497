package state

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordedWrites records each write a StatusWriter makes, failing the
// first fails of them.
type recordedWrites struct {
	mu     sync.Mutex
	writes []string
	fails  int
	done   chan string
}

func (r *recordedWrites) write(_ context.Context, key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, key)
	r.done <- key
	if r.fails > 0 {
		r.fails--
		return errors.New("refused")
	}
	return nil
}

func (r *recordedWrites) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.writes)
}

// A standby replica (no scheduling activity: no Enqueue) writes nothing,
// whatever the informers notify; once it schedules, writes of one key are
// coalesced, a failed write is retried, and onStart runs once.
func TestStatusWriter(t *testing.T) {
	const interval = 20 * time.Millisecond
	await := func(t *testing.T, r *recordedWrites, want string) {
		t.Helper()
		select {
		case got := <-r.done:
			assert.Equal(t, want, got)
		case <-time.After(5 * time.Second):
			t.Fatalf("no write of %s", want)
		}
	}
	t.Run("a standby replica writes nothing", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := &recordedWrites{done: make(chan string, 10)}
		w := NewStatusWriter(ctx, "test-standby", interval, r.write, nil)
		w.Notify("a")
		w.NotifyAfter("a", 0)
		time.Sleep(5 * interval)
		assert.Zero(t, r.count())
	})
	t.Run("writes of one key coalesce", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// An interval long beside the loop below, however loaded the
		// machine: the changes must all fall within one.
		const coalescing = 500 * time.Millisecond
		r := &recordedWrites{done: make(chan string, 10)}
		started := 0
		w := NewStatusWriter(ctx, "test-coalesce", coalescing, r.write, func() { started++ })
		for range 50 {
			w.Enqueue("a")
			w.Notify("a")
		}
		await(t, r, "a")
		time.Sleep(2 * coalescing)
		assert.Equal(t, 1, r.count(), "fifty changes within the interval are one write")
		assert.Equal(t, 1, started)
	})
	t.Run("a failed write is retried", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := &recordedWrites{done: make(chan string, 10), fails: 1}
		w := NewStatusWriter(ctx, "test-retry", interval, r.write, nil)
		w.Enqueue("b")
		await(t, r, "b")
		await(t, r, "b")
		require.Equal(t, 2, r.count())
	})
}

// A status patch spells out a field set to nil, so a merge patch clears it.
func TestStatusPatch(t *testing.T) {
	patch, err := StatusPatch(map[string]interface{}{"running": 3, "waiting": nil})
	require.NoError(t, err)
	assert.JSONEq(t, `{"status": {"running": 3, "waiting": null}}`, string(patch))
}

// NotifyAfter writes after its own delay, not the writer's interval (a
// write that waits for the informers); a writer whose context ended
// writes nothing more.
func TestStatusWriterNotifyAfterAndStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &recordedWrites{done: make(chan string, 10)}
	w := NewStatusWriter(ctx, "test-notify-after", time.Hour, r.write, nil)
	w.Start()
	w.NotifyAfter("soon", 10*time.Millisecond)
	w.Notify("late") // an hour's interval: not within this test
	select {
	case got := <-r.done:
		assert.Equal(t, "soon", got)
	case <-time.After(5 * time.Second):
		t.Fatal("NotifyAfter's write did not come")
	}
	cancel()
	time.Sleep(50 * time.Millisecond) // the queue shuts down
	w.NotifyAfter("after-stop", 0)
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, 1, r.count(), "nothing written after the context ended")
}
