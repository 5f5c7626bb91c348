package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

func TestOrderTimePrioSeq(t *testing.T) {
	k := NewKernel()
	var got []string
	add := func(at Time, p Prio, name string) {
		k.Schedule(at, p, func(now Time) {
			if now != at {
				t.Errorf("%s fired at %v, scheduled at %v", name, now, at)
			}
			got = append(got, name)
		})
	}
	add(30, 0, "c")
	add(10, 1, "b2")
	add(10, 0, "a1")
	add(10, 1, "b3")
	add(10, 0, "a2")
	add(20, -1, "x")
	if err := k.Run(Never); err != nil {
		t.Fatal(err)
	}
	want := []string{"a1", "a2", "b2", "b3", "x", "c"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

func TestCancelAndStaleIDs(t *testing.T) {
	k := NewKernel()
	fired := 0
	id := k.Schedule(5, 0, func(Time) { fired++ })
	if !k.Cancel(id) || k.Cancel(id) {
		t.Fatal("Cancel: want true once, then false")
	}
	if err := k.Run(Never); err != nil || fired != 0 {
		t.Fatalf("cancelled event fired %d times (err %v)", fired, err)
	}
	// The slot is reused; the stale id must not cancel the new event.
	k.Schedule(6, 0, func(Time) { fired++ })
	if k.Cancel(id) {
		t.Fatal("stale id cancelled a new event")
	}
	if err := k.Run(Never); err != nil || fired != 1 {
		t.Fatalf("fired %d, want 1 (err %v)", fired, err)
	}
	if k.Cancel(0) || k.Cancel(EventID(1<<40)) {
		t.Fatal("bogus ids cancelled something")
	}
}

func TestNextIsTheEarliestPendingEvent(t *testing.T) {
	k := NewKernel()
	if _, ok := k.Next(); ok {
		t.Fatal("Next on an empty kernel: want none")
	}
	late := k.Schedule(9, 0, func(Time) {})
	early := k.Schedule(4, 1, func(Time) {})
	k.Schedule(7, 0, func(Time) {})
	for _, tc := range []struct {
		cancel EventID
		want   Time
	}{{0, 4}, {early, 7}, {late, 7}} {
		if tc.cancel != 0 {
			k.Cancel(tc.cancel)
		}
		if at, ok := k.Next(); !ok || at != tc.want {
			t.Fatalf("Next = %v, %v; want %v", at, ok, tc.want)
		}
	}
	if err := k.Run(Never); err != nil {
		t.Fatal(err)
	}
	if _, ok := k.Next(); ok {
		t.Fatal("Next after every event fired: want none")
	}
}

func TestRunUntilAndNestedScheduling(t *testing.T) {
	k := NewKernel()
	var times []Time
	var tick func(now Time)
	tick = func(now Time) {
		times = append(times, now)
		k.After(10, 0, tick)
	}
	k.Schedule(0, 0, tick)
	if err := k.Run(35); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(times, []Time{0, 10, 20, 30}) || k.Now() != 35 || k.Pending() != 1 {
		t.Fatalf("times %v now %v pending %d", times, k.Now(), k.Pending())
	}
}

func TestSchedulingInThePastIsAnError(t *testing.T) {
	k := NewKernel()
	k.Schedule(10, 0, func(Time) { k.Schedule(5, 0, func(Time) {}) })
	if err := k.Run(Never); !errors.Is(err, ErrPast) {
		t.Fatalf("err = %v, want ErrPast", err)
	}
}

func TestRunContextStops(t *testing.T) {
	k := NewKernel()
	ctx, cancel := context.WithCancel(context.Background())
	var loop func(Time)
	loop = func(Time) {
		if k.Fired() == 5000 {
			cancel()
		}
		k.After(1, 0, loop)
	}
	k.Schedule(0, 0, loop)
	if err := k.RunContext(ctx, Never); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestHeapAgainstSort fires random events with random cancellations and compares the order
// with a sort of the survivors.
func TestHeapAgainstSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		k := NewKernel()
		type ev struct {
			at   Time
			prio Prio
			n    int
		}
		var want, got []ev
		var ids []EventID
		for n := range 500 {
			e := ev{Time(rng.IntN(100)), Prio(rng.IntN(3)), n}
			ids = append(ids, k.Schedule(e.at, e.prio, func(Time) { got = append(got, e) }))
			want = append(want, e)
		}
		dead := map[int]bool{}
		for range 100 {
			n := rng.IntN(len(ids))
			if k.Cancel(ids[n]) {
				dead[n] = true
			}
		}
		want = slices.DeleteFunc(want, func(e ev) bool { return dead[e.n] })
		sort.SliceStable(want, func(i, j int) bool {
			if want[i].at != want[j].at {
				return want[i].at < want[j].at
			}
			return want[i].prio < want[j].prio
		})
		if err := k.Run(Never); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: order differs from a stable sort", round)
		}
	}
}

func TestStreamsAreIndependentAndDeterministic(t *testing.T) {
	a, b := Stream(7, "workload"), Stream(7, "workload")
	for range 10 {
		if a.Uint64() != b.Uint64() {
			t.Fatal("same master and name gave different streams")
		}
	}
	if Stream(7, "workload").Uint64() == Stream(7, "router").Uint64() {
		t.Fatal("different names gave the same stream")
	}
	if Stream(7, "workload").Uint64() == Stream(8, "workload").Uint64() {
		t.Fatal("different masters gave the same stream")
	}
}

// BenchmarkSchedulePop measures one Schedule plus one fired event with ~1,000 events pending.
func BenchmarkSchedulePop(b *testing.B) {
	k := NewKernel()
	rng := rand.New(rand.NewPCG(1, 1))
	fn := func(Time) {}
	for range 1000 {
		k.Schedule(Time(rng.IntN(1e6)), 0, fn)
	}
	b.ReportAllocs()
	for b.Loop() {
		k.After(Time(1+rng.IntN(1e6)), 0, fn)
		next := k.slots[k.heap[0]].at
		if err := k.Run(next); err != nil {
			b.Fatal(err)
		}
	}
}
