package prefix

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// indexOp is one step of an Index scenario.
type indexOp struct {
	add      []uint64
	ep       int32
	remove   bool // RemoveEndpoint(ep)
	capacity int  // SetCapacity(ep, capacity) when > 0
}

func TestIndexMatch(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		ops      []indexOp
		query    []uint64
		want     []int
	}{
		{name: "empty", query: []uint64{1}, want: []int{0, 0}},
		{
			name:  "leading blocks",
			ops:   []indexOp{{add: []uint64{1, 2, 3}, ep: 0}, {add: []uint64{1}, ep: 1}},
			query: []uint64{1, 2, 3, 4},
			want:  []int{3, 1},
		},
		{
			name:  "counts every held block until a block nobody holds (GIE semantics)",
			ops:   []indexOp{{add: []uint64{1, 2, 3}, ep: 0}, {add: []uint64{1, 3}, ep: 1}},
			query: []uint64{1, 2, 3, 4, 3},
			want:  []int{3, 2},
		},
		{
			name:  "stops at the first unknown block",
			ops:   []indexOp{{add: []uint64{1, 2}, ep: 0}},
			query: []uint64{1, 9, 2},
			want:  []int{1, 0},
		},
		{
			name:     "per-endpoint LRU evicts only that endpoint",
			capacity: 2,
			ops:      []indexOp{{add: []uint64{1, 2}, ep: 0}, {add: []uint64{1, 2}, ep: 1}, {add: []uint64{3}, ep: 0}},
			query:    []uint64{1, 2, 3},
			want:     []int{2, 2}, // 0 lost block 1 but still counts 2 and 3

		},
		{
			name:     "re-adding refreshes recency",
			capacity: 2,
			ops:      []indexOp{{add: []uint64{1, 2}, ep: 0}, {add: []uint64{1}, ep: 0}, {add: []uint64{3}, ep: 0}},
			query:    []uint64{1, 3},
			want:     []int{2, 0},
		},
		{
			name:  "SetCapacity shrinks from the least recent end",
			ops:   []indexOp{{add: []uint64{1, 2, 3}, ep: 0}, {ep: 0, capacity: 1}},
			query: []uint64{3},
			want:  []int{1, 0},
		},
		{
			name:  "removed endpoint",
			ops:   []indexOp{{add: []uint64{1, 2}, ep: 0}, {add: []uint64{1}, ep: 1}, {ep: 0, remove: true}},
			query: []uint64{1, 2},
			want:  []int{0, 1},
		},
		{
			name:  "an endpoint beyond out still keeps the walk going",
			ops:   []indexOp{{add: []uint64{1, 2}, ep: 5}, {add: []uint64{1, 2}, ep: 0}},
			query: []uint64{1, 2},
			want:  []int{2, 0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := newTestIndex(t, tc.capacity)
			for _, op := range tc.ops {
				switch {
				case op.remove:
					x.RemoveEndpoint(op.ep)
				case op.capacity > 0:
					if err := x.SetCapacity(op.ep, op.capacity); err != nil {
						t.Fatal(err)
					}
				default:
					x.Add(op.add, op.ep)
				}
			}
			got := []int{-1, -1}[:len(tc.want)]
			x.Match(tc.query, got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Match (-want +got):\n%s", diff)
			}
		})
	}
}

func newTestIndex(t *testing.T, capacity int) *Index {
	t.Helper()
	if capacity == 0 {
		capacity = 100
	}
	x, err := NewIndex(capacity)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestIndexErrors(t *testing.T) {
	if _, err := NewIndex(0); err == nil {
		t.Error("NewIndex(0) succeeded, want an error")
	}
	x := newTestIndex(t, 4)
	tests := []struct {
		name   string
		ep     int32
		blocks int
	}{
		{name: "negative endpoint", ep: -1, blocks: 3},
		{name: "zero capacity", ep: 0, blocks: 0},
		{name: "negative capacity", ep: 2, blocks: -5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := x.SetCapacity(tc.ep, tc.blocks); err == nil {
				t.Errorf("SetCapacity(%d, %d) succeeded, want an error", tc.ep, tc.blocks)
			}
		})
	}
}

func TestIndexBounded(t *testing.T) {
	const capacity = 50
	x := newTestIndex(t, capacity)
	var hashes []uint64
	for i := range 10 * capacity {
		hashes = ChainHashString(hashes[:0], uint64(i), "a prompt long enough for several blocks", 4, 0, false)
		ep := int32(i % 3)
		x.Add(hashes, ep)
		if x.Len(ep) > capacity {
			t.Fatalf("add %d: endpoint %d holds %d > %d", i, ep, x.Len(ep), capacity)
		}
	}
	if x.Hashes() > 3*capacity {
		t.Errorf("Hashes = %d > %d", x.Hashes(), 3*capacity)
	}
	for ep := range int32(3) {
		if q := len(x.endpoints[ep].ring); q > 2*(8*capacity+1024) {
			t.Errorf("endpoint %d: use queue grew to %d for %d blocks", ep, q, capacity)
		}
	}
	for ep := range int32(3) {
		x.RemoveEndpoint(ep)
	}
	if x.Hashes() != 0 {
		t.Errorf("Hashes = %d after removing every endpoint", x.Hashes())
	}
}

func TestIndexSteadyStateDoesNotAllocate(t *testing.T) {
	x := newTestIndex(t, DefaultIndexCapacity)
	hashes := ChainHashString(nil, 1, string(make([]byte, 64*256)), 64, 0, false)
	x.Add(hashes, 0)
	x.Add(hashes, 1)
	out := make([]int, 2)
	allocs := testing.AllocsPerRun(50, func() {
		x.Add(hashes, 1)
		x.Match(hashes, out)
	})
	if allocs != 0 {
		t.Errorf("allocs per Add+Match = %v, want 0", allocs)
	}
}

// Holds follows the LRU: a block evicted by a later add is no longer held.
func TestIndexHoldsAndCapacity(t *testing.T) {
	x, err := NewIndex(8)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.SetCapacity(1, 2); err != nil {
		t.Fatal(err)
	}
	x.Add([]uint64{10, 11, 12}, 1)
	x.Add([]uint64{10}, 0)
	for _, tc := range []struct {
		h    uint64
		ep   int32
		want bool
	}{{10, 1, false}, {11, 1, true}, {12, 1, true}, {10, 0, true}, {11, 0, false}, {10, -1, false}} {
		if got := x.Holds(tc.h, tc.ep); got != tc.want {
			t.Errorf("Holds(%d, %d) = %v, want %v", tc.h, tc.ep, got, tc.want)
		}
	}
	if c0, c1, c9 := x.Capacity(0), x.Capacity(1), x.Capacity(9); c0 != 8 || c1 != 2 || c9 != 8 {
		t.Errorf("capacities %d %d %d, want 8 2 8", c0, c1, c9)
	}
}
