package engine

import (
	"math/rand/v2"
	"testing"
)

// TestHashTableAgainstMap runs random puts, lookups and deletes on a hashTable and a map.
func TestHashTableAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var tab hashTable
		want := map[uint64]int32{}
		// Few distinct keys with a poor spread, so that probe runs collide and wrap.
		key := func() uint64 { return uint64(r.IntN(300)) << (r.IntN(3) * 20) }
		for step := range 3000 {
			switch r.IntN(10) {
			case 0: // delete a random third of the keys
				for k := range want {
					if r.IntN(3) == 0 {
						i, ok := slotOf(&tab, k)
						if !ok {
							t.Fatalf("round %d step %d: key %d is in no slot", round, step, k)
						}
						tab.deleteAt(i)
						delete(want, k)
					}
				}
			case 1, 2, 3, 4:
				k, b := key(), r.Int32N(1000)
				if tab.full() {
					tab.grow()
				}
				tab.put(k, b)
				want[k] = b
			default:
				k := key()
				b, ok := tab.get(k)
				if wb, wok := want[k]; ok != wok || b != wb {
					t.Fatalf("round %d step %d: get(%d) = %d, %v; want %d, %v", round, step, k, b, ok, wb, wok)
				}
			}
			if tab.n != len(want) {
				t.Fatalf("round %d step %d: %d entries, want %d", round, step, tab.n, len(want))
			}
		}
		for k, wb := range want {
			if b, ok := tab.get(k); !ok || b != wb {
				t.Fatalf("round %d: get(%d) = %d, %v; want %d", round, k, b, ok, wb)
			}
		}
	}
}

// TestPrefixTableAgainstMap runs random inserts, lookups (getOrPut too) and removals on a prefixTable and a
// map, with few anchors so that lines fill and spill, tracking each entry's position through
// onMove as the block pool does.
func TestPrefixTableAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 50 {
		var tab prefixTable
		tab.reserve(64)
		pos := map[int32]uint32{} // block → position
		tab.onMove = func(block1 int32, p uint32) { pos[block1-1] = p }
		want := map[uint64]int32{} // hash → block
		keyOf := func(h uint64) blockKey { return blockKey{hash: h, anchor: h % 3, lane: uint32(h/3) % 4} }
		next := int32(0)
		for step := range 2000 {
			h := uint64(r.IntN(200))
			switch b, ok := want[h]; {
			case ok && r.IntN(2) == 0: // remove it
				tab.deleteAt(pos[b])
				delete(want, h)
				delete(pos, b)
			case !ok && len(want) < 64 && r.IntN(2) == 0: // insert it
				_, p, found := tab.getOrPut(keyOf(h), next)
				if found {
					t.Fatalf("round %d step %d: getOrPut(%d) found a hash the table does not hold", round, step, h)
				}
				pos[next] = p
				want[h] = next
				next++
			case len(want) < 64 && r.IntN(3) == 0: // look it up, inserting it when absent
				got, p, found := tab.getOrPut(keyOf(h), next)
				if found != ok || (ok && got != b) {
					t.Fatalf("round %d step %d: getOrPut(%d) = %d, %v; want %d, %v", round, step, h, got, found, b, ok)
				}
				if !found {
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
		}
		for h, b := range want {
			if tab.key(pos[b]) != h {
				t.Fatalf("round %d: block %d's position holds %d, want %d", round, b, tab.key(pos[b]), h)
			}
		}
	}
}

// slotOf returns the slot of t holding key, looking at every slot rather than probing as
// the table does.
func slotOf(t *hashTable, key uint64) (uint64, bool) {
	for i, s := range t.slots {
		if s.block1 != 0 && s.key == key {
			return uint64(i), true
		}
	}
	return 0, false
}
