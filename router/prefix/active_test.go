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

// TestActiveBlocksSharedIndex drives an ActiveBlocks and the KV-event Holders it shares a slab
// with through interleaved random operations: blocks cached and evicted, requests added and
// released, an endpoint cleared. Each side must keep answering as its own model says, so a
// block one side drops stays for the other, and a slot is only reused once neither holds it.
func TestActiveBlocksSharedIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const eps = 6
	x := NewHolders(3)
	a := NewActiveBlocksIn(x)
	kv := &naiveHolders{perKey: 3, m: map[uint64][]Holder{}}
	active := map[uint64]map[int32]int{}
	type held struct {
		ep      int32
		hashes  []uint64
		handles []int32
	}
	var live []held
	chains := make([][]uint64, 4)
	for c := range chains {
		chains[c] = AppendTokenBlockHashes(nil, uint64(c), []int32{1, 2, 3, 4, 5, 6, 7, 8}, 2)
	}
	run, wantRun := make([]int, eps), make([]int, eps)
	shared, wantShared := make([]int, eps), make([]int, eps)
	var found []int32
	for step := range 4000 {
		c := chains[rng.IntN(len(chains))]
		ep := int32(rng.IntN(eps))
		switch op := rng.IntN(7); {
		case op == 0: // an engine caches a prefix
			for _, h := range c[:1+rng.IntN(len(c))] {
				x.Store(h, Holder{Endpoint: ep})
				kv.store(h, Holder{Endpoint: ep})
			}
		case op == 1: // an engine evicts a block
			h := c[rng.IntN(len(c))]
			x.Remove(h, Holder{Endpoint: ep})
			kv.remove(h, func(y Holder) bool { return y != Holder{Endpoint: ep} })
		case op == 2 && rng.IntN(10) == 0:
			x.RemoveEndpoint(ep)
			for h := range kv.m {
				kv.remove(h, func(y Holder) bool { return y.Endpoint != ep })
			}
		case op == 3: // a request becomes active
			hs := append([]uint64(nil), c[:1+rng.IntN(len(c))]...)
			live = append(live, held{ep, hs, a.Add(hs, ep, found, nil)})
			for _, h := range hs {
				if active[h] == nil {
					active[h] = map[int32]int{}
				}
				active[h][ep]++
			}
		case op == 4 && len(live) > 0: // a request ends
			k := rng.IntN(len(live))
			r := live[k]
			live = append(live[:k], live[k+1:]...)
			a.Release(r.handles, r.ep)
			for _, h := range r.hashes {
				if active[h][r.ep]--; active[h][r.ep] == 0 {
					delete(active[h], r.ep)
				}
				if len(active[h]) == 0 {
					delete(active, h)
				}
			}
		default:
			x.LeadingRun(c, run)
			kv.leadingRun(c, wantRun)
			found = a.Shared(c, shared, found[:0])
			clear(wantShared)
			for _, h := range c {
				if len(active[h]) == 0 {
					break
				}
				for e := range active[h] {
					wantShared[e]++
				}
			}
			if diff := cmp.Diff(wantRun, run); diff != "" {
				t.Fatalf("step %d: LeadingRun (-want +got):\n%s", step, diff)
			}
			if diff := cmp.Diff(wantShared, shared); diff != "" {
				t.Fatalf("step %d: Shared (-want +got):\n%s", step, diff)
			}
		}
		if a.Len() != len(active) {
			t.Fatalf("step %d: active Len = %d, want %d", step, a.Len(), len(active))
		}
		both := len(active)
		for h := range kv.m {
			if active[h] == nil {
				both++
			}
		}
		if x.Len() != both {
			t.Fatalf("step %d: index Len = %d, want %d blocks cached or active", step, x.Len(), both)
		}
	}
}
