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
						i, ok := tab.find(k)
						if !ok {
							t.Fatalf("round %d step %d: find(%d) failed", round, step, k)
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
