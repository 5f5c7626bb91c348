package workloads

import (
	"container/heap"
	"testing"
	"time"
)

// finish is a completion the test driver has scheduled.
type finish struct {
	id string
	at time.Duration
}

type finishQueue []finish

func (q finishQueue) Len() int { return len(q) }
func (q finishQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].id < q[j].id
}
func (q finishQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *finishQueue) Push(x any)   { *q = append(*q, x.(finish)) }
func (q *finishQueue) Pop() any {
	old := *q
	f := old[len(old)-1]
	*q = old[:len(old)-1]
	return f
}

// drive runs s to the end the way a discrete-event simulator does: on a virtual clock, each
// request finishes service(req) after it arrives, and Done is reported then. It calls visit
// for every request in the order they are taken (nil visit keeps them all and returns them).
func drive(t *testing.T, s *Stream, service func(Request) time.Duration, visit func(Request)) []Request {
	t.Helper()
	var got []Request
	var fin finishQueue
	now := time.Duration(0)
	for {
		req, ok := s.Peek()
		if at, aok := s.PeekArrival(); aok != ok || at != req.Arrival {
			t.Fatalf("PeekArrival = %v, %v; Peek gives %v, %v", at, aok, req.Arrival, ok)
		}
		if len(fin) > 0 && (!ok || fin[0].at <= req.Arrival) {
			f := heap.Pop(&fin).(finish)
			now = f.at
			if err := s.Done(f.id, Completion{At: f.at}); err != nil {
				t.Fatalf("Done(%s): %v", f.id, err)
			}
			continue
		}
		if !ok {
			break
		}
		req, _ = s.Next()
		if req.Arrival < now {
			t.Fatalf("request %s arrives at %v, before the clock %v", req.ID, req.Arrival, now)
		}
		now = req.Arrival
		if visit != nil {
			visit(req)
		} else {
			got = append(got, req)
		}
		heap.Push(&fin, finish{id: req.ID, at: req.Arrival + service(req)})
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream error: %v", err)
	}
	if n := s.InFlight(); n != 0 {
		t.Fatalf("stream ended with %d sessions in flight", n)
	}
	return got
}

// fixedService returns a service time function that takes d for every request.
func fixedService(d time.Duration) func(Request) time.Duration {
	return func(Request) time.Duration { return d }
}

// mustBuild builds cfg or fails the test.
func mustBuild(t *testing.T, cfg Config, seed uint64, opts ...Option) *Stream {
	t.Helper()
	s, err := Build(cfg, seed, opts...)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}
