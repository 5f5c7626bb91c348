package prefix

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// storeOp is one step of a BlockStore scenario.
type storeOp struct {
	add    []uint64      // hashes to Add
	ep     int32         // endpoint for add, or to remove
	remove bool          // RemoveEndpoint(ep)
	at     time.Duration // time of the op after t0
}

func TestBlockStoreMatch(t *testing.T) {
	tests := []struct {
		name      string
		capacity  int
		ops       []storeOp
		query     []uint64
		candidate []bool
		want      []int
	}{
		{
			name:  "empty store",
			query: []uint64{1, 2},
			want:  []int{0, 0, 0},
		},
		{
			name:  "leading blocks per endpoint",
			ops:   []storeOp{{add: []uint64{1, 2, 3}, ep: 0}, {add: []uint64{1, 2}, ep: 1}, {add: []uint64{1}, ep: 2}},
			query: []uint64{1, 2, 3, 4},
			want:  []int{3, 2, 1},
		},
		{
			name:  "an endpoint that drops out does not come back",
			ops:   []storeOp{{add: []uint64{1, 2, 3}, ep: 0}, {add: []uint64{1, 3}, ep: 1}},
			query: []uint64{1, 2, 3},
			want:  []int{3, 1, 0},
		},
		{
			name:  "walk stops when nobody survives",
			ops:   []storeOp{{add: []uint64{1, 2, 3}, ep: 0}, {add: []uint64{1, 9, 3}, ep: 1}},
			query: []uint64{1, 9, 3},
			want:  []int{1, 3, 0},
		},
		{
			name:      "non-candidates are ignored and do not keep the walk going",
			ops:       []storeOp{{add: []uint64{1, 2}, ep: 0}, {add: []uint64{1, 2, 3}, ep: 1}},
			query:     []uint64{1, 2, 3},
			candidate: []bool{true, false, true},
			want:      []int{2, 0, 0},
		},
		{
			name:  "unknown first block",
			ops:   []storeOp{{add: []uint64{1, 2}, ep: 0}},
			query: []uint64{5, 1, 2},
			want:  []int{0, 0, 0},
		},
		{
			name:  "removed endpoint",
			ops:   []storeOp{{add: []uint64{1, 2}, ep: 0}, {add: []uint64{1, 2}, ep: 1}, {ep: 0, remove: true}},
			query: []uint64{1, 2},
			want:  []int{0, 2, 0},
		},
		{
			name:     "capacity evicts the least recently added",
			capacity: 3,
			ops:      []storeOp{{add: []uint64{1, 2, 3}, ep: 0}, {add: []uint64{4}, ep: 1}},
			query:    []uint64{1, 2, 3},
			want:     []int{0, 0, 0},
		},
		{
			name:     "re-adding refreshes recency",
			capacity: 3,
			ops:      []storeOp{{add: []uint64{1, 2, 3}, ep: 0}, {add: []uint64{1}, ep: 0}, {add: []uint64{4}, ep: 1}},
			query:    []uint64{1, 3},
			want:     []int{2, 0, 0},
		},
		{
			name:  "endpoint beyond out is not reported",
			ops:   []storeOp{{add: []uint64{1}, ep: 7}},
			query: []uint64{1},
			want:  []int{0, 0, 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t, tc.capacity)
			applyStoreOps(s, tc.ops)
			got := make([]int, len(tc.want))
			for i := range got {
				got[i] = -1 // Match must clear out.
			}
			s.Match(tc.query, tc.candidate, got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Match (-want +got):\n%s", diff)
			}
		})
	}
}

func newTestStore(t *testing.T, capacity int) *BlockStore {
	t.Helper()
	if capacity == 0 {
		capacity = 100
	}
	s, err := NewBlockStore(capacity)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func applyStoreOps(s *BlockStore, ops []storeOp) {
	for _, op := range ops {
		if op.remove {
			s.RemoveEndpoint(op.ep)
			continue
		}
		s.Add(op.add, op.ep, t0.Add(op.at))
	}
}

func TestBlockStoreEvictExpired(t *testing.T) {
	tests := []struct {
		name    string
		ops     []storeOp
		now     time.Duration
		ttl     time.Duration
		want    int
		wantLen int
	}{
		{name: "empty", now: time.Hour, ttl: time.Minute, want: 0, wantLen: 0},
		{
			name: "only stale blocks go",
			ops:  []storeOp{{add: []uint64{1, 2}, at: 0}, {add: []uint64{3}, at: 10 * time.Minute}},
			now:  25 * time.Minute, ttl: 20 * time.Minute, want: 2, wantLen: 1,
		},
		{
			name: "re-adding keeps a block fresh",
			ops:  []storeOp{{add: []uint64{1, 2}, at: 0}, {add: []uint64{1}, ep: 1, at: 10 * time.Minute}},
			now:  25 * time.Minute, ttl: 20 * time.Minute, want: 1, wantLen: 1,
		},
		{
			name: "exactly ttl old is kept",
			ops:  []storeOp{{add: []uint64{1}, at: 0}},
			now:  20 * time.Minute, ttl: 20 * time.Minute, want: 0, wantLen: 1,
		},
		{
			name: "negative ttl counts as zero",
			ops:  []storeOp{{add: []uint64{1}, at: 0}, {add: []uint64{2}, at: time.Second}},
			now:  time.Second, ttl: -time.Hour, want: 1, wantLen: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t, 0)
			applyStoreOps(s, tc.ops)
			if got := s.EvictExpired(t0.Add(tc.now), tc.ttl); got != tc.want {
				t.Errorf("EvictExpired = %d, want %d", got, tc.want)
			}
			if got := s.Len(); got != tc.wantLen {
				t.Errorf("Len = %d, want %d", got, tc.wantLen)
			}
		})
	}
}

func TestNewBlockStoreRejectsBadCapacity(t *testing.T) {
	for _, c := range []int{0, -1} {
		if _, err := NewBlockStore(c); err == nil {
			t.Errorf("NewBlockStore(%d) succeeded, want an error", c)
		}
	}
}

func TestBlockStoreBounded(t *testing.T) {
	const capacity = 100
	s := newTestStore(t, capacity)
	hashes := make([]uint64, 0, 37)
	for i := range 10 * capacity / 37 * 3 {
		hashes = ChainHashString(hashes[:0], uint64(i), "some prompt text that is long enough to make many blocks of four", 4, 37, false)
		s.Add(hashes, int32(i%5), t0.Add(time.Duration(i)*time.Second))
		if s.Len() > capacity {
			t.Fatalf("after add %d: Len = %d > capacity %d", i, s.Len(), capacity)
		}
	}
	if len(s.entries) > capacity+1 {
		t.Errorf("slab grew to %d slots for capacity %d", len(s.entries), capacity)
	}
	checkStoreInvariants(t, s)
}

func TestBlockStoreSteadyStateDoesNotAllocate(t *testing.T) {
	s := newTestStore(t, 1000)
	hashes := ChainHashString(nil, 1, string(make([]byte, 128*250)), 128, 0, false)
	s.Add(hashes, 0, t0)
	s.Add(hashes, 1, t0)
	out := make([]int, 4)
	allocs := testing.AllocsPerRun(50, func() {
		s.Add(hashes, 1, t0)
		s.Match(hashes, nil, out)
	})
	if allocs != 0 {
		t.Errorf("allocs per Add+Match = %v, want 0", allocs)
	}
}

// checkStoreInvariants verifies the LRU list, the map and the free list agree.
func checkStoreInvariants(t *testing.T, s *BlockStore) {
	t.Helper()
	seen := 0
	prev := none
	for i := s.head; i != none; i = s.entries[i].next {
		e := s.entries[i]
		if e.prev != prev {
			t.Fatalf("slot %d: prev = %d, want %d", i, e.prev, prev)
		}
		if got, ok := s.byHash.Get(e.hash); !ok || got != i {
			t.Fatalf("slot %d: map has %d, %v", i, got, ok)
		}
		if e.holders.empty() {
			t.Fatalf("slot %d has no holders", i)
		}
		prev = i
		seen++
	}
	if prev != s.tail {
		t.Fatalf("tail = %d, want %d", s.tail, prev)
	}
	if seen != s.byHash.Len() || seen > s.capacity {
		t.Fatalf("list has %d entries, map %d, capacity %d", seen, s.byHash.Len(), s.capacity)
	}
	free := 0
	for i := s.free; i != none; i = s.entries[i].next {
		free++
	}
	if seen+free != len(s.entries) {
		t.Fatalf("%d live + %d free != %d slots", seen, free, len(s.entries))
	}
}
