package kvevents

import (
	"fmt"
	"testing"
)

// The start-up and re-admission paths, message by message: a late start with no snapshot, a
// loaded snapshot followed by duplicates, a gap or a restart, and a suspension that ends in
// a continuing stream (the blocks come back) or a restart (they go).
func TestIndexBoot(t *testing.T) {
	toks := seqTokens(0, 64)
	p1 := uint64(1)
	first := payload(stored([]uint64{1}, nil, toks[:16]))
	second := payload(stored([]uint64{2}, &p1, toks[16:32]))
	loaded := Snapshot{Endpoints: []EndpointSnapshot{{ID: "p", Seq: 5, Started: true,
		Keys: []KeyPair{{1, 0x11}, {9, 0x99}}}}}
	history := func(g Gap) ([][]byte, error) { // a young replica's replay buffer
		if g.From != 0 {
			return nil, fmt.Errorf("from %d", g.From)
		}
		return [][]byte{first, second, payload()}[:g.To], nil
	}
	type step struct {
		seq uint64
		msg []byte
	}
	cases := []struct {
		name    string
		load    bool
		suspend bool // after the first step, as the gateway does on ejecting the replica
		fill    Filler
		steps   []step
		want    string
	}{
		{"complete from the start", false, false, nil, []step{{0, first}, {1, second}}, "keys 2 held 2 stale false behind 0 dups 0 restored 0"},
		{"late start, no snapshot", false, false, nil, []step{{7, first}, {8, second}}, "keys 2 held 2 stale true behind 7 dups 0 restored 0"},
		{"late start, history replayed", false, false, history, []step{{3, payload()}}, "keys 2 held 2 stale false behind 0 dups 0 restored 0"},
		{"snapshot, then what it holds, then new", true, false, nil, []step{{4, first}, {5, first}, {6, second}}, "keys 3 held 3 stale false behind 0 dups 2 restored 0"},
		{"snapshot, then a gap", true, false, nil, []step{{8, second}}, "keys 3 held 3 stale true behind 2 dups 0 restored 0"},
		{"snapshot, then a restart after new messages", true, false, nil, []step{{6, second}, {0, first}}, "keys 1 held 1 stale false behind 0 dups 0 restored 0"},
		{"suspended, the stream goes on: blocks restored", false, true, nil, []step{{0, first}, {1, second}}, "keys 2 held 2 stale false behind 0 dups 0 restored 1"},
		{"suspended, the replica restarted: clean", false, true, nil, []step{{0, second}, {0, first}}, "keys 1 held 1 stale false behind 0 dups 0 restored 0"},
		{"suspended, then a gap: clean and stale", false, true, nil, []step{{0, first}, {5, payload()}}, "keys 0 held 0 stale true behind 5 dups 0 restored 0"},
		{"suspended, then a gap the replay fills", false, true, history, []step{{0, first}, {2, payload()}}, "keys 2 held 2 stale false behind 0 dups 0 restored 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			x := NewIndex(DefaultIndexConfig(), DefaultLimits(), rec)
			if tc.load {
				x.Load(loaded)
			}
			for i, s := range tc.steps {
				_ = x.Handle("p", "m", s.seq, s.msg, tc.fill)
				if i == 0 && tc.suspend {
					rec.AllBlocksCleared("p") // the policy forgot the ejected replica
					x.Suspend("p")
				}
			}
			bs := x.BootStats()
			got := fmt.Sprintf("keys %d held %d stale %v behind %d dups %d restored %d",
				x.Keys("p"), len(rec.keys("p")), len(x.Stale()) > 0, x.Behind("p"), bs.Duplicates, bs.Restored)
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// Hold keeps messages back until Release, so that a snapshot loaded meanwhile is what they
// apply to: the message after the snapshot's sequence number is kept, not cleared by Load.
func TestIndexHold(t *testing.T) {
	toks := seqTokens(0, 32)
	rec := newRecorder()
	x := NewIndex(DefaultIndexConfig(), DefaultLimits(), rec)
	x.Hold()
	done := make(chan error)
	go func() { done <- x.Handle("p", "m", 6, payload(stored([]uint64{2}, nil, toks[16:32])), nil) }()
	x.Load(Snapshot{Endpoints: []EndpointSnapshot{{ID: "p", Seq: 5, Started: true, Keys: []KeyPair{{1, 0x11}}}}})
	if !x.Holding() {
		t.Fatal("not holding")
	}
	x.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := x.Keys("p"); got != 2 {
		t.Errorf("keys = %d, want 2 (the snapshot's and the held message's)", got)
	}
}

// Resend gives every block to the observer again; Drop forgets a replica with its state.
func TestIndexResendDrop(t *testing.T) {
	rec := newRecorder()
	x := NewIndex(DefaultIndexConfig(), DefaultLimits(), rec)
	x.Load(Snapshot{Endpoints: []EndpointSnapshot{{ID: "p", Seq: 5, Started: true, Keys: []KeyPair{{1, 0x11}, {2, 0x22}}}}})
	rec.AllBlocksCleared("p")
	x.Resend()
	if got := len(rec.keys("p")); got != 2 {
		t.Errorf("after Resend: %d blocks held, want 2", got)
	}
	x.Drop("p")
	if got := len(rec.keys("p")) + x.Keys("p"); got != 0 {
		t.Errorf("after Drop: %d blocks", got)
	}
	// A dropped replica that comes back is a new one: its late first message is counted.
	_ = x.Handle("p", "m", 3, payload(Event{Kind: AllBlocksCleared}), nil)
	if got := x.Behind("p"); got != 3 {
		t.Errorf("behind after Drop = %d, want 3", got)
	}
}
