package cluster

import (
	"math"
	"slices"

	"kvroute/sim"
)

// links are the replicas' NICs that KV transfers between prefill and decode replicas
// share. A transfer moves its bytes from its prefill replica's NIC to its decode replica's;
// transfers that share a NIC share it fairly (processor sharing): a transfer's rate is the
// smaller of its sender's NIC over the transfers that NIC sends and its receiver's NIC over
// the transfers that NIC receives, recomputed whenever a transfer starts or ends. The
// fabric between NICs is taken to be non-blocking, as a rail-optimised RDMA fabric is, so a
// transfer is limited by its two ends only. A NIC that one transfer leaves idle in part
// (because its other end is the narrower one) is not given to the others: the model errs on
// the side of slower transfers under contention.
type links struct {
	k      *sim.Kernel
	nic    []float64 // bytes/s of each replica's NIC, each direction
	sends  []int     // transfers each replica's NIC sends
	recvs  []int     // transfers each replica's NIC receives
	active []*transfer
	last   sim.Time    // when the active transfers' bytes were last brought up to date
	next   sim.EventID // the next end of a transfer, or 0
	endFn  func(sim.Time)
}

// transfer is one KV transfer in flight.
type transfer struct {
	from, to int
	left     float64 // bytes still to move
	rate     float64 // bytes/s
	done     func(now sim.Time)
}

func newLinks(k *sim.Kernel, nic []float64) *links {
	l := &links{k: k, nic: nic, sends: make([]int, len(nic)), recvs: make([]int, len(nic))}
	l.endFn = l.ended
	return l
}

// start begins moving bytes from replica from to replica to at now; done is called when
// they have all arrived.
func (l *links) start(now sim.Time, from, to int, bytes int64, done func(sim.Time)) {
	l.advance(now)
	l.active = append(l.active, &transfer{from: from, to: to, left: float64(bytes), done: done})
	l.sends[from]++
	l.recvs[to]++
	l.reschedule(now)
}

// advance brings every active transfer's bytes left up to now.
func (l *links) advance(now sim.Time) {
	dt := (now - l.last).Duration().Seconds()
	l.last = now
	if dt <= 0 {
		return
	}
	for _, t := range l.active {
		t.left -= t.rate * dt
	}
}

// reschedule sets every active transfer's rate and schedules the first end.
func (l *links) reschedule(now sim.Time) {
	if l.next != 0 {
		l.k.Cancel(l.next)
		l.next = 0
	}
	first := sim.Never
	for _, t := range l.active {
		t.rate = min(l.nic[t.from]/float64(l.sends[t.from]), l.nic[t.to]/float64(l.recvs[t.to]))
		at := now + sim.Time(math.Ceil(max(t.left, 0)/t.rate*1e9))
		first = min(first, at)
	}
	if first != sim.Never {
		l.next = l.k.Schedule(first, 1, l.endFn)
	}
}

// ended ends the transfers whose bytes have arrived by now (within a nanosecond's worth),
// in the order they started, then reschedules the others.
func (l *links) ended(now sim.Time) {
	l.next = 0
	l.advance(now)
	var done []*transfer
	l.active = slices.DeleteFunc(l.active, func(t *transfer) bool {
		if t.left > t.rate*1e-9 {
			return false
		}
		l.sends[t.from]--
		l.recvs[t.to]--
		done = append(done, t)
		return true
	})
	l.reschedule(now)
	for _, t := range done {
		t.done(now)
	}
}
