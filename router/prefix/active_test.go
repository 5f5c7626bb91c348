package prefix

import (
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestActiveBlocksModel drives ActiveBlocks and a map of per-endpoint reference counts with
// the same random requests (prefixes of a few chains, some repeating a block) and compares
// every distinct count and shared count. Adds take the slots of the latest Shared walk,
// often stale (other adds and releases ran since, or another chain was walked), which Add
// must check.
func TestActiveBlocksModel(t *testing.T) {
	for _, eps := range []int{5, 70} {
		rng := rand.New(rand.NewPCG(9, uint64(eps)))
		a := NewActiveBlocks()
		model := map[uint64]map[int32]int{} // block -> endpoint -> requests holding it
		type held struct {
			ep      int32
			hashes  []uint64
			handles []int32
		}
		var live []held
		chains := make([][]uint64, 5)
		for c := range chains {
			chains[c] = AppendTokenBlockHashes(nil, uint64(c%2), []int32{1, 2, 3, 4, 5, 6, int32(c), 8, 9, 10}, 2)
		}
		out, want := make([]int, eps), make([]int, eps)
		var found []int32 // the latest Shared walk's slots
		for step := range 3000 {
			switch op := rng.IntN(3); {
			case op == 0 || len(live) == 0:
				c := chains[rng.IntN(len(chains))]
				hs := append([]uint64(nil), c[:1+rng.IntN(len(c))]...)
				if rng.IntN(10) == 0 {
					hs = append(hs, hs[0]) // a block held twice by one request
				}
				ep := int32(rng.IntN(eps))
				var hint []int32
				if rng.IntN(2) == 0 {
					hint = found
				}
				live = append(live, held{ep, hs, a.Add(hs, ep, hint, nil)})
				for _, h := range hs {
					if model[h] == nil {
						model[h] = map[int32]int{}
					}
					model[h][ep]++
				}
			case op == 1:
				k := rng.IntN(len(live))
				r := live[k]
				live = append(live[:k], live[k+1:]...)
				a.Release(r.handles, r.ep)
				for _, h := range r.hashes {
					if model[h][r.ep]--; model[h][r.ep] == 0 {
						delete(model[h], r.ep)
					}
					if len(model[h]) == 0 {
						delete(model, h)
					}
				}
			default:
				c := chains[rng.IntN(len(chains))]
				n := rng.IntN(eps + 1)
				found = a.Shared(c, out[:n], found[:0])
				clear(want)
				for _, h := range c {
					if len(model[h]) == 0 {
						break
					}
					for ep := range model[h] {
						if int(ep) < n {
							want[ep]++
						}
					}
				}
				if diff := cmp.Diff(want[:n], out[:n]); diff != "" {
					t.Fatalf("eps=%d step %d: Shared (-want +got):\n%s", eps, step, diff)
				}
			}
			if a.Len() != len(model) {
				t.Fatalf("eps=%d step %d: Len = %d, want %d", eps, step, a.Len(), len(model))
			}
			for ep := range int32(eps) {
				n := 0
				for _, m := range model {
					if m[ep] > 0 {
						n++
					}
				}
				if got := a.Distinct(ep); got != n {
					t.Fatalf("eps=%d step %d: Distinct(%d) = %d, want %d", eps, step, ep, got, n)
				}
			}
		}
	}
}
