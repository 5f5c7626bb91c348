package gateway

import (
	"context"
	"io"
	"sync/atomic"
	"time"
)

// The timeouts that bound a proxied request, in the order its clock runs them.
const (
	phaseHeader    int32 = iota // from sending an attempt to its response head
	phaseFirstByte              // from the head to the body's first byte
	phaseIdle                   // between two reads of the body
)

var phaseErrs = [...]error{ErrHeaderTimeout, ErrFirstByteTimeout, ErrIdleTimeout}

// clock is a request's context and the one timer that ends it: at the request's deadline
// (TimeoutsConfig.Request), or when the phase the request is in (waiting for a response head,
// its first byte, or the next bytes) lasts longer than its timeout. The cause says which.
// Ending the context makes the transport abandon the backend's connection.
type clock struct {
	context.Context
	cancel   context.CancelCauseFunc
	timer    *time.Timer
	to       TimeoutsConfig
	deadline time.Time
	phase    atomic.Int32
}

// startClock starts the clock of a request that arrived at now, under parent.
func (k *clock) startClock(parent context.Context, to TimeoutsConfig, now time.Time) {
	k.Context, k.cancel = context.WithCancelCause(parent)
	k.to, k.deadline = to, now.Add(to.Request)
	k.timer = time.AfterFunc(to.Request, k.expire)
}

func (k *clock) expire() {
	if time.Now().Before(k.deadline) {
		k.cancel(phaseErrs[k.phase.Load()])
		return
	}
	k.cancel(ErrRequestTimeout)
}

// arm starts phase: the context ends if it lasts longer than its timeout, or at the deadline.
func (k *clock) arm(phase int32) {
	d := [...]time.Duration{k.to.Header, k.to.FirstByte, k.to.Idle}[phase]
	k.phase.Store(phase)
	k.timer.Reset(min(d, time.Until(k.deadline)))
}

// cause returns why I/O under the clock's context failed with err: a timeout, the client's
// going away, or err itself when the context has not ended.
func (k *clock) cause(err error) error {
	if k.Context.Err() == nil {
		return err
	}
	if c := context.Cause(k.Context); isTimeout(c) {
		return c
	}
	return errClientGone
}

// read reads from r under the first-byte timeout, or the idle timeout once a byte came.
func (k *clock) read(r io.Reader, p []byte) (int, error) {
	phase := phaseIdle
	if k.phase.Load() == phaseFirstByte {
		phase = phaseFirstByte
	}
	k.arm(phase)
	n, err := r.Read(p)
	if n > 0 {
		k.phase.Store(phaseIdle)
	}
	if err != nil && err != io.EOF {
		err = k.cause(err)
	}
	return n, err
}

// stopClock stops the timer and ends the context.
func (k *clock) stopClock() {
	k.timer.Stop()
	k.cancel(nil)
}
