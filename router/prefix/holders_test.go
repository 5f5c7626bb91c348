package prefix

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// naiveHolders is the obvious model of Holders: a map from block to its entries, least
// recently stored first, with the leading run counted entry by entry.
type naiveHolders struct {
	perKey int
	m      map[uint64][]Holder
}

func (n *naiveHolders) store(h uint64, e Holder) {
	es := slices.DeleteFunc(n.m[h], func(x Holder) bool { return x == e })
	if es = append(es, e); n.perKey > 0 && len(es) > n.perKey {
		es = es[len(es)-n.perKey:]
	}
	n.m[h] = es
}

func (n *naiveHolders) remove(h uint64, keep func(Holder) bool) {
	es := slices.DeleteFunc(n.m[h], func(x Holder) bool { return !keep(x) })
	if len(es) == 0 {
		delete(n.m, h)
	} else {
		n.m[h] = es
	}
}

func (n *naiveHolders) leadingRun(hashes []uint64, out []int) {
	clear(out)
	for i, h := range hashes {
		alive := false
		for _, e := range n.m[h] {
			if int(e.Endpoint) < len(out) && out[e.Endpoint] == i {
				out[e.Endpoint]++
				alive = true
			}
		}
		if !alive {
			return
		}
	}
}

// TestHoldersModel drives Holders and the model with the same random operations over a few
// chains of blocks and endpoints, with and without a per-block bound and across the bitset
// and the large-fleet walks, and compares every leading run and block count.
func TestHoldersModel(t *testing.T) {
	for _, tc := range []struct {
		name        string
		perKey, eps int
	}{
		{"unbounded", 0, 12}, {"perKey=3", 3, 12}, {"perKey=10/eps=1100", 10, 1100}, {"unbounded/eps=70", 0, 70},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.perKey), uint64(tc.eps)))
			x, m := NewHolders(tc.perKey), &naiveHolders{perKey: tc.perKey, m: map[uint64][]Holder{}}
			chains := make([][]uint64, 6)
			for c := range chains {
				chains[c] = AppendTokenBlockHashes(nil, uint64(c%3), []int32{1, 2, 3, 4, 5, 6, int32(c), 8, 9, 10, 11, 12}, 2)
			}
			got, want := make([]int, tc.eps), make([]int, tc.eps)
			for step := range 4000 {
				chain := chains[rng.IntN(len(chains))]
				e := Holder{Endpoint: int32(rng.IntN(tc.eps)), Tag: uint8(rng.IntN(2))}
				switch op := rng.IntN(10); {
				case op < 5:
					for _, h := range chain[:1+rng.IntN(len(chain))] {
						x.Store(h, e)
						m.store(h, e)
					}
				case op < 7:
					h := chain[rng.IntN(len(chain))]
					x.Remove(h, e)
					m.remove(h, func(y Holder) bool { return y != e })
				case op < 8 && rng.IntN(8) == 0:
					x.RemoveEndpoint(e.Endpoint)
					for h := range m.m {
						m.remove(h, func(y Holder) bool { return y.Endpoint != e.Endpoint })
					}
				default:
					n := rng.IntN(tc.eps + 1)
					x.LeadingRun(chain, got[:n])
					m.leadingRun(chain, want[:n])
					if diff := cmp.Diff(want[:n], got[:n]); diff != "" {
						t.Fatalf("step %d: LeadingRun over %d endpoints (-want +got):\n%s", step, n, diff)
					}
				}
				if x.Len() != len(m.m) {
					t.Fatalf("step %d: Len = %d, want %d", step, x.Len(), len(m.m))
				}
			}
		})
	}
}

// TestHoldersPerKeyDropsLeastRecent pins the per-block LRU: storing an entry again makes it
// the most recent, so the least recent other entry goes first, and an endpoint whose last
// entry goes stops counting.
func TestHoldersPerKeyDropsLeastRecent(t *testing.T) {
	x := NewHolders(2)
	a, aSpec, b := Holder{Endpoint: 0}, Holder{Endpoint: 0, Tag: 1}, Holder{Endpoint: 1}
	x.Store(7, a)
	x.Store(7, b)
	x.Store(7, a)     // a is the most recent now
	x.Store(7, aSpec) // drops b, not a
	run := make([]int, 2)
	x.LeadingRun([]uint64{7}, run)
	if want := []int{1, 0}; !slices.Equal(run, want) {
		t.Fatalf("run = %v, want %v", run, want)
	}
	x.Remove(7, a) // aSpec still holds endpoint 0
	if x.LeadingRun([]uint64{7}, run); run[0] != 1 {
		t.Fatalf("after removing a: run = %v, want endpoint 0 still holding", run)
	}
	if x.Remove(7, aSpec); x.Len() != 0 {
		t.Fatalf("Len = %d after removing every entry, want 0", x.Len())
	}
}

// TestHoldersStaleSuccessorGuess pins the check on a successor guess: a freed slot keeps its
// hash, so a walk guessing it must see that it is free and find the block's new slot.
func TestHoldersStaleSuccessorGuess(t *testing.T) {
	x := NewHolders(0)
	a, b, c := uint64(11), uint64(12), uint64(13)
	e := Holder{Endpoint: 0}
	for _, h := range []uint64{a, b, c} { // slots 0, 1, 2; a's successor guess is b's slot
		x.Store(h, e)
	}
	x.Remove(b, e) // slot 1 freed, still holding b's hash
	x.Remove(c, e) // slot 2 freed, on top of the free list
	x.Store(b, e)  // b now in slot 2
	run := make([]int, 1)
	if x.LeadingRun([]uint64{a, b}, run); run[0] != 2 {
		t.Fatalf("run = %v, want [2]: the walk took b's freed slot for b", run)
	}
}

// TestHoldersWeightedRun checks that each block of an endpoint's leading run counts at the
// largest weight among its entries, and that the run ends at the first block it lacks in
// every tier.
func TestHoldersWeightedRun(t *testing.T) {
	const gpu, spec, cpu = 0, 1, 2
	weight := func(tag uint8) float64 { return []float64{1, 1, 0.8}[tag] }
	x := NewHolders(0)
	for _, st := range []struct {
		h   uint64
		ep  int32
		tag uint8
	}{
		{1, 0, gpu}, {2, 0, cpu}, {3, 0, gpu}, // ep 0: gpu, cpu, gpu
		{1, 1, cpu}, {1, 1, gpu}, {2, 1, cpu}, // ep 1: both tiers, then cpu; lacks 3
		{2, 2, gpu}, {3, 2, gpu}, // ep 2: lacks block 1
		{1, 3, spec}, {1, 3, cpu}, // ep 3: speculative beats cpu
	} {
		x.Store(st.h, Holder{Endpoint: st.ep, Tag: st.tag})
	}
	hashes := []uint64{1, 2, 3}
	run := make([]int, 4)
	x.LeadingRun(hashes, run)
	out := make([]float64, 4)
	x.WeightedRun(hashes, run, weight, out)
	want := []float64{2.8, 1.8, 0, 1}
	for ep := range want {
		if math.Abs(out[ep]-want[ep]) > 1e-12 {
			t.Errorf("endpoint %d: %v, want %v (all %v)", ep, out[ep], want[ep], out)
		}
	}
}
