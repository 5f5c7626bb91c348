package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPrefixTableAgainstMap runs random inserts (putInEmpty, else getOrPut), lookups (getOrPut
// too) and removals on a prefixTable and a map, with few anchors so that lines fill and
// spill, tracking each entry's position through onMove as the block pool does.
func TestPrefixTableAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 50 {
		var tab prefixTable
		tab.reserve(64, make([]block, 2000))
		pos := map[int32]uint32{} // block → position
		tab.onMove = func(block1 int32, p uint32) { pos[block1-1] = p }
		want := map[uint64]int32{} // hash → block
		// Some hashes share their tag, so that lookups compare the full hash; others do not.
		full := func(h uint64) uint64 { return h | (h%5)<<40 }
		keyOf := func(h uint64) blockKey { return blockKey{hash: full(h), anchor: h % 3, lane: uint32(h/3) % 4} }
		next := int32(0)
		for step := range 2000 {
			h := uint64(r.IntN(200))
			switch b, ok := want[h]; {
			case ok && r.IntN(2) == 0: // remove it
				tab.deleteAt(pos[b])
				delete(want, h)
				delete(pos, b)
			case !ok && len(want) < 64 && r.IntN(2) == 0: // insert it, as the pool's cache does
				p, put := tab.putInEmpty(keyOf(h), next)
				if !put {
					var found bool
					if _, p, found = tab.getOrPut(keyOf(h), next); found {
						t.Fatalf("round %d step %d: getOrPut(%d) found a hash the table does not hold", round, step, h)
					}
				}
				tab.blocks[next].hash = full(h) // the caller records it
				pos[next] = p
				want[h] = next
				next++
			case len(want) < 64 && r.IntN(3) == 0: // look it up, inserting it when absent
				got, p, found := tab.getOrPut(keyOf(h), next)
				if found != ok || (ok && got != b) {
					t.Fatalf("round %d step %d: getOrPut(%d) = %d, %v; want %d, %v", round, step, h, got, found, b, ok)
				}
				if !found {
					tab.blocks[next].hash = full(h)
					pos[next] = p
					want[h] = next
					next++
				}
			default:
				got, gok := tab.get(keyOf(h))
				if gok != ok || (ok && got != b) {
					t.Fatalf("round %d step %d: get(%d) = %d, %v; want %d, %v", round, step, h, got, gok, b, ok)
				}
			}
			if tab.n != len(want) {
				t.Fatalf("round %d step %d: %d entries, want %d", round, step, tab.n, len(want))
			}
			if err := checkLanes(&tab); err != nil {
				t.Fatalf("round %d step %d: %v", round, step, err)
			}
		}
		for h, b := range want {
			if tab.key(pos[b]) != full(h) {
				t.Fatalf("round %d: block %d's position holds %x, want %x", round, b, tab.key(pos[b]), full(h))
			}
		}
	}
}

// TestPrefixTableSpillCountSticks fills one lane past what its count can hold: the count
// sticks, and every key stays reachable as the lane empties again.
func TestPrefixTableSpillCountSticks(t *testing.T) {
	var tab prefixTable
	tab.reserve(64, make([]block, 400))
	pos := map[int32]uint32{}
	tab.onMove = func(block1 int32, p uint32) { pos[block1-1] = p }
	key := func(h uint64) blockKey { return blockKey{hash: h, anchor: 7, lane: 3} }
	const n = 300
	for h := range uint64(n) {
		_, p, found := tab.getOrPut(key(h), int32(h))
		if found {
			t.Fatalf("getOrPut(%d) found a hash the table does not hold", h)
		}
		tab.blocks[h].hash = h // the caller records it
		pos[int32(h)] = p
	}
	first := tab.lane(key(0))
	if got := tab.lines[first].tag & spillMask; got != spillMask {
		t.Fatalf("lane counts %d entries in the overflow table, want the count stuck at %d", got, spillMask)
	}
	for h := range uint64(n) { // remove them in order: the lane's slots first
		for k := h; k < n; k += 37 {
			if b, ok := tab.get(key(k)); !ok || b != int32(k) {
				t.Fatalf("after removing %d keys: get(%d) = %d, %v", h, k, b, ok)
			}
		}
		tab.deleteAt(pos[int32(h)])
		if err := checkLanes(&tab); err != nil {
			t.Fatalf("after removing key %d: %v", h, err)
		}
	}
	if tab.n != 0 || tab.over.Len() != 0 {
		t.Fatalf("%d entries (%d in the overflow table) left", tab.n, tab.over.Len())
	}
}

// checkLanes checks that each lane's first slot says whether its second is taken, and counts
// the lane's entries in the overflow table.
func checkLanes(t *prefixTable) error {
	spilled := map[uint32]uint32{}
	for _, e := range t.over.All() {
		spilled[e.lane]++
	}
	for l := 0; l < len(t.lines); l += lineSlots {
		for i := uint32(l); i < uint32(l+groupBlocks); i++ {
			s0, s1 := t.lines[i], t.lines[i+groupBlocks]
			if second := s1.block1 != 0; second != (s0.tag&secondBit != 0) {
				return fmt.Errorf("lane at slot %d says its second slot is taken: %v; it is: %v", i, !second, second)
			}
			// A count at spillMask has stuck: lookups search the overflow table, whatever it holds.
			if got := s0.tag & spillMask; got != spilled[i] && got != spillMask {
				return fmt.Errorf("lane at slot %d counts %d entries in the overflow table, which holds %d", i, got, spilled[i])
			}
		}
	}
	return nil
}
