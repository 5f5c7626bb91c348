package gateway

import (
	"context"
	"io"
	"sync"
	"time"
)

// The timeouts that bound a proxied request, in the order its clock runs them.
const (
	phaseHeader    int32 = iota // from sending an attempt to its response head
	phaseFirstByte              // from the head to the body's first byte
	phaseIdle                   // between two reads of the body
)

var phaseErrs = [...]error{ErrHeaderTimeout, ErrFirstByteTimeout, ErrIdleTimeout}

// clock is a request's context, the context of its current attempt at a backend, and the
// one timer that ends them. The request's context ends at the request's deadline
// (TimeoutsConfig.Request) or when the client goes away, and ends the attempt's with it; the
// attempt's alone ends when the phase it is in (waiting for a response head, its first byte,
// or the next bytes) lasts longer than its timeout, so that another attempt can follow a
// header timeout. The cause says which. Ending an attempt's context makes the transport
// abandon that attempt's connection.
type clock struct {
	context.Context
	cancel   context.CancelCauseFunc
	timer    *time.Timer
	to       TimeoutsConfig
	deadline time.Time

	mu            sync.Mutex
	attempt       context.Context // nil before the first attempt
	cancelAttempt context.CancelCauseFunc
	phase         int32
	phaseEnd      time.Time // when the phase times out
}

// startClock starts the clock of a request that arrived at now, under parent.
func (k *clock) startClock(parent context.Context, to TimeoutsConfig, now time.Time) {
	k.Context, k.cancel = context.WithCancelCause(parent)
	k.to, k.deadline = to, now.Add(to.Request)
	k.phaseEnd = k.deadline
	k.timer = time.AfterFunc(to.Request, k.expire)
}

// expire ends the request at its deadline, or the attempt when its phase timed out. A timer
// that fired as it was re-armed finds the phase not over, and does nothing: it fires again.
func (k *clock) expire() {
	now := time.Now()
	if !now.Before(k.deadline) {
		k.cancel(ErrRequestTimeout)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if now.Before(k.phaseEnd) || k.cancelAttempt == nil {
		return
	}
	k.cancelAttempt(phaseErrs[k.phase])
}

// startAttempt ends the previous attempt's context and returns the next attempt's, a child
// of parent, in the header phase. parent is a context under the request's: the one the
// proxy's outgoing request carries.
func (k *clock) startAttempt(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	k.mu.Lock()
	if k.cancelAttempt != nil {
		k.cancelAttempt(nil)
	}
	k.attempt, k.cancelAttempt = ctx, cancel
	k.mu.Unlock()
	k.arm(phaseHeader)
	return ctx
}

// arm starts phase: the attempt ends if it lasts longer than its timeout, the request at
// its deadline.
func (k *clock) arm(phase int32) {
	k.mu.Lock()
	d := k.setPhase(phase)
	k.mu.Unlock()
	k.timer.Reset(d)
}

// setPhase records phase and when it times out, and returns the time until then; the caller
// holds mu and then re-arms the timer.
func (k *clock) setPhase(phase int32) time.Duration {
	d := min([...]time.Duration{k.to.Header, k.to.FirstByte, k.to.Idle}[phase], time.Until(k.deadline))
	k.phase, k.phaseEnd = phase, time.Now().Add(d)
	return d
}

// cause returns why I/O under the current attempt's context failed with err: a timeout, the
// client's going away, or err itself when the context has not ended.
func (k *clock) cause(err error) error {
	k.mu.Lock()
	ctx := k.attempt
	k.mu.Unlock()
	if ctx == nil {
		ctx = k.Context
	}
	if ctx.Err() == nil {
		return err
	}
	if c := context.Cause(ctx); isTimeout(c) {
		return c
	}
	return errClientGone
}

// read reads from r under the first-byte timeout, or the idle timeout once a byte came.
func (k *clock) read(r io.Reader, p []byte) (int, error) {
	k.mu.Lock()
	first := k.phase == phaseFirstByte
	d := k.setPhase(max(k.phase, phaseFirstByte))
	k.mu.Unlock()
	k.timer.Reset(d)
	n, err := r.Read(p)
	if n > 0 && first {
		k.mu.Lock()
		k.phase = phaseIdle
		k.mu.Unlock()
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
