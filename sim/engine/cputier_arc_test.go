package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// arcOp is one step of a tier's history: store and complete ('s'), store and leave pending
// ('p'), touch ('t') or pin ('n') the hashes.
type arcOp struct {
	kind byte
	hs   []uint64
}

func hs(h ...uint64) []uint64 { return h }

// replay applies ops to t.
func replay(t cpuTier, ops []arcOp) {
	for _, op := range ops {
		switch op.kind {
		case 's', 'p':
			toStore, _, _ := t.prepareStore(op.hs, nil, nil)
			if op.kind == 's' {
				t.completeStore(slices.Clone(toStore), nil)
			}
		case 't':
			t.touch(op.hs)
		case 'n':
			t.pin(op.hs)
		}
	}
}

// TestARCTierEviction checks ARC's rules (vLLM's ARCCachePolicy) on arcTier and on the
// reference's refARC: each case ends with a store whose victims LRU would pick differently.
func TestARCTierEviction(t *testing.T) {
	cases := []struct {
		name        string
		capacity    int
		ops         []arcOp
		store       []uint64
		wantEvicted []uint64
		ok          bool
	}{
		{name: "blocks touched again once ready outlive blocks seen once", capacity: 4,
			ops:   []arcOp{{'s', hs(1, 2)}, {'t', hs(1, 2)}, {'s', hs(3, 4)}},
			store: hs(5, 6), wantEvicted: hs(3, 4), ok: true}, // LRU: 1, 2
		{name: "a B1 ghost touched raises T1's target: T2 gives up a block", capacity: 4,
			ops:   []arcOp{{'s', hs(1, 2)}, {'t', hs(1, 2)}, {'s', hs(3, 4)}, {'s', hs(5, 6)}, {'t', hs(3, 4)}, {'t', hs(3)}},
			store: hs(7), wantEvicted: hs(2), ok: true}, // target 3 > |T1| 2: T2's oldest (touch walks 2 before 1); without the rule: 5
		{name: "a B2 ghost touched lowers the target again", capacity: 4,
			ops: []arcOp{{'s', hs(1, 2)}, {'t', hs(1, 2)}, {'s', hs(3, 4)}, {'s', hs(5, 6)}, {'t', hs(3, 4)}, {'t', hs(3)},
				{'s', hs(7)}, {'t', hs(2)}, {'t', hs(5)}},
			store: hs(8), wantEvicted: hs(6), ok: true}, // 2 is a B2 ghost: target 3−2 = 1 ≤ |T1| 2; without the rule: T2's 1
		{name: "a block still being stored is not promoted by a touch", capacity: 3,
			ops:   []arcOp{{'s', hs(1)}, {'t', hs(1)}, {'p', hs(2)}, {'t', hs(2)}, {'s', hs(3)}, {'t', hs(1)}, {'n', hs(3)}},
			store: hs(4), wantEvicted: hs(1), ok: true}, // 2 (pending) and 3 (pinned) cannot go: T2's 1 does
		{name: "a store's own held blocks are protected", capacity: 2,
			ops:   []arcOp{{'s', hs(1, 2)}},
			store: hs(1, 3), wantEvicted: hs(2), ok: true}, // LRU: 1
		{name: "nothing evictable: skipped", capacity: 2,
			ops:   []arcOp{{'s', hs(1)}, {'n', hs(1)}, {'p', hs(2)}},
			store: hs(3)},
	}
	for _, tc := range cases {
		for name, mk := range map[string]func(int) cpuTier{
			"arcTier": func(c int) cpuTier { return newARCTier(c) },
			"refARC":  func(c int) cpuTier { return newRefARC(c) },
		} {
			t.Run(tc.name+"/"+name, func(t *testing.T) {
				tier := mk(tc.capacity)
				replay(tier, tc.ops)
				before := tier.len()
				_, evicted, ok := tier.prepareStore(tc.store, nil, nil)
				if ok != tc.ok {
					t.Fatalf("ok = %v, want %v", ok, tc.ok)
				}
				if diff := cmp.Diff(tc.wantEvicted, evicted, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("evicted (-want +got):\n%s", diff)
				}
				if !ok && tier.len() != before {
					t.Errorf("a skipped store changed the tier: %d blocks, was %d", tier.len(), before)
				}
			})
		}
	}
}

// TestARCTierMatchesReference replays random histories on arcTier and refARC and compares
// every answer: stores, victims, lookups and loads in progress.
func TestARCTierMatchesReference(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		capacity := 1 + rng.IntN(12)
		a, r := newARCTier(capacity), newRefARC(capacity)
		var pending [][]uint64
		for step := range 300 {
			var h []uint64 // distinct, as a request's chained block hashes are
			for range 1 + rng.IntN(4) {
				if x := uint64(rng.IntN(3 * capacity)); !slices.Contains(h, x) {
					h = append(h, x)
				}
			}
			switch rng.IntN(6) {
			case 0, 1:
				s1, e1, ok1 := a.prepareStore(h, nil, nil)
				s2, e2, ok2 := r.prepareStore(h, nil, nil)
				if ok1 != ok2 || !slices.Equal(s1, s2) || !slices.Equal(e1, e2) {
					t.Fatalf("seed %d step %d store %v: arcTier %v %v %v, refARC %v %v %v", seed, step, h, s1, e1, ok1, s2, e2, ok2)
				}
				pending = append(pending, slices.Clone(s1))
			case 2:
				if len(pending) > 0 {
					i := rng.IntN(len(pending))
					if c1, c2 := a.completeStore(pending[i], nil), r.completeStore(pending[i], nil); !slices.Equal(c1, c2) {
						t.Fatalf("seed %d step %d complete: %v vs %v", seed, step, c1, c2)
					}
					pending = slices.Delete(pending, i, i+1)
				}
			case 3:
				a.touch(h)
				r.touch(h)
			case 4:
				if k := a.lookup(h); k > 0 && k == r.lookup(h) && rng.IntN(2) == 0 {
					a.pin(h[:k])
					r.pin(h[:k])
				}
			case 5:
				if a.loading(h) != r.loading(h) {
					t.Fatalf("seed %d step %d: loading(%v) differs", seed, step, h)
				}
				a.unpin(h[:0])
			}
			if a.lookup(h) != r.lookup(h) || a.len() != r.len() {
				t.Fatalf("seed %d step %d: lookup(%v) %d vs %d, len %d vs %d", seed, step, h, a.lookup(h), r.lookup(h), a.len(), r.len())
			}
		}
	}
}

// TestNewCPUTier checks that the eviction policy is chosen by name and a wrong one named.
func TestNewCPUTier(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   string // the tier's type, or "" for an error
	}{{"", "*engine.lruTier"}, {"lru", "*engine.lruTier"}, {"arc", "*engine.arcTier"}, {"lfu", ""}} {
		tier, err := newCPUTier(tc.policy, 4)
		if tc.want == "" {
			if err == nil {
				t.Errorf("newCPUTier(%q): no error", tc.policy)
			}
			continue
		}
		if err != nil || typeName(tier) != tc.want {
			t.Errorf("newCPUTier(%q) = %s, %v; want %s", tc.policy, typeName(tier), err, tc.want)
		}
	}
}

func typeName(v any) string { return fmt.Sprintf("%T", v) }
