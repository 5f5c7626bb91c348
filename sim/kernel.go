package sim

import (
	"context"
	"errors"
	"fmt"
)

// Prio orders events that fall at the same time: lower fires first. Equal (time, priority)
// events fire in the order they were scheduled.
type Prio int8

// EventID identifies a scheduled event, for Cancel. The zero EventID is never issued.
type EventID uint64

// ErrPast is returned by Run when an event was scheduled before the current time.
var ErrPast = errors.New("sim: event scheduled in the past")

// Kernel is the event loop. The zero value is not usable; call NewKernel.
type Kernel struct {
	now   Time
	seq   uint64
	slots []slot  // event storage; heap entries point here
	free  []int32 // free slot indices
	heap  []int32 // 4-ary min-heap of slot indices
	fired uint64
	err   error
}

type slot struct {
	at   Time
	prio Prio
	gen  uint32 // bumped on reuse, so stale EventIDs cancel nothing
	live bool
	seq  uint64
	fn   func(Time)
}

// NewKernel returns a kernel at time 0 with an empty queue.
func NewKernel() *Kernel { return &Kernel{} }

// Now returns the current virtual time: the time of the event being fired, or of the last one.
func (k *Kernel) Now() Time { return k.now }

// Fired returns the number of events fired so far.
func (k *Kernel) Fired() uint64 { return k.fired }

// Next returns the time of the earliest event scheduled and not yet fired or cancelled;
// false when there is none. Cancelled events at the top of the queue are dropped.
func (k *Kernel) Next() (Time, bool) {
	for len(k.heap) > 0 {
		if s := &k.slots[k.heap[0]]; s.live {
			return s.at, true
		}
		k.free = append(k.free, k.pop())
	}
	return 0, false
}

// Pending returns the number of events scheduled and not yet fired or cancelled.
func (k *Kernel) Pending() int { return len(k.heap) }

// Schedule arranges for fn to be called with the event's time at virtual time at. Scheduling
// before Now is a bug in the caller: the event is dropped and Run returns ErrPast.
func (k *Kernel) Schedule(at Time, p Prio, fn func(Time)) EventID {
	if at < k.now {
		if k.err == nil {
			k.err = fmt.Errorf("%w: at %v, now %v", ErrPast, at, k.now)
		}
		return 0
	}
	var i int32
	if n := len(k.free); n > 0 {
		i, k.free = k.free[n-1], k.free[:n-1]
	} else {
		k.slots = append(k.slots, slot{})
		i = int32(len(k.slots) - 1)
	}
	s := &k.slots[i]
	k.seq++
	s.at, s.prio, s.seq, s.fn, s.live = at, p, k.seq, fn, true
	s.gen++
	k.push(i)
	return EventID(uint64(s.gen)<<32 | uint64(i+1))
}

// After schedules fn d nanoseconds after Now.
func (k *Kernel) After(d Time, p Prio, fn func(Time)) EventID { return k.Schedule(k.now+d, p, fn) }

// Cancel removes a scheduled event; it reports whether the event was still pending.
func (k *Kernel) Cancel(id EventID) bool {
	i := int32(uint32(id)) - 1
	if i < 0 || int(i) >= len(k.slots) {
		return false
	}
	s := &k.slots[i]
	if !s.live || s.gen != uint32(id>>32) {
		return false
	}
	s.live, s.fn = false, nil // popped and recycled lazily
	return true
}

// Run fires events in order until the queue is empty or the next event is after until. It
// returns ErrPast if an event was scheduled in the past.
func (k *Kernel) Run(until Time) error {
	return k.RunContext(context.Background(), until)
}

// RunContext is Run that also stops, returning ctx's error, when ctx is done (checked every
// 4,096 events).
func (k *Kernel) RunContext(ctx context.Context, until Time) error {
	for len(k.heap) > 0 && k.err == nil {
		top := &k.slots[k.heap[0]]
		if top.at > until {
			break
		}
		i := k.pop()
		s := &k.slots[i]
		fn, live := s.fn, s.live
		s.live, s.fn = false, nil
		k.free = append(k.free, i)
		if !live {
			continue
		}
		k.now = s.at
		k.fired++
		fn(k.now)
		if k.fired&4095 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if k.err == nil && until != Never && k.now < until {
		k.now = until
	}
	return k.err
}

func (k *Kernel) less(a, b int32) bool {
	x, y := &k.slots[a], &k.slots[b]
	if x.at != y.at {
		return x.at < y.at
	}
	if x.prio != y.prio {
		return x.prio < y.prio
	}
	return x.seq < y.seq
}

func (k *Kernel) push(i int32) {
	k.heap = append(k.heap, i)
	c := len(k.heap) - 1
	for c > 0 {
		p := (c - 1) / 4
		if !k.less(k.heap[c], k.heap[p]) {
			break
		}
		k.heap[c], k.heap[p] = k.heap[p], k.heap[c]
		c = p
	}
}

func (k *Kernel) pop() int32 {
	h := k.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	k.heap = h
	p := 0
	for {
		first := 4*p + 1
		if first >= len(h) {
			break
		}
		best := first
		for c := first + 1; c < first+4 && c < len(h); c++ {
			if k.less(h[c], h[best]) {
				best = c
			}
		}
		if !k.less(h[best], h[p]) {
			break
		}
		h[p], h[best] = h[best], h[p]
		p = best
	}
	return top
}
