package queues

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// A converting watch stopped with an event in flight ends its goroutine:
// its result channel closes instead of blocking on a send nobody reads.
func TestConvertingWatchStopsWithAnEventInFlight(t *testing.T) {
	in := watch.NewFake()
	w := newConvertingWatch(in, func(e watch.Event) watch.Event { return e })
	go in.Add(&corev1.Pod{}) // read by the converting goroutine, never by us
	time.Sleep(50 * time.Millisecond)
	w.Stop()
	time.Sleep(50 * time.Millisecond) // nobody reads meanwhile, as after an informer stops
	select {
	case _, open := <-w.ResultChan():
		assert.False(t, open, "the goroutine still held the event: it would have blocked for ever")
	case <-time.After(5 * time.Second):
		t.Fatal("the converting watch's goroutine did not end after Stop")
	}
}
