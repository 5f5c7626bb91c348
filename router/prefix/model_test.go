package prefix

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// script reads a fuzz input as a sequence of small numbers.
type script struct{ b []byte }

func (s *script) more() bool { return len(s.b) > 0 }

// next returns the next byte modulo n (0 once the input is exhausted).
func (s *script) next(n int) int {
	if len(s.b) == 0 {
		return 0
	}
	v := int(s.b[0]) % n
	s.b = s.b[1:]
	return v
}

// hashes returns a short run of hashes from a small alphabet, so runs overlap.
func (s *script) hashes() []uint64 {
	n := s.next(6)
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(s.next(12))
	}
	return out
}

// mask returns a mask over endpoints 0..3, or nil.
func (s *script) mask() []bool {
	m := s.next(17)
	if m == 16 {
		return nil
	}
	return []bool{m&1 != 0, m&2 != 0, m&4 != 0, m&8 != 0}
}

// fleet maps the four endpoints a script names onto endpoint ids, and says
// how many endpoints Match results cover.
type fleet struct {
	eps    [4]int32
	outLen int
}

// smallFleet is the fleet of the fuzz targets.
var smallFleet = fleet{eps: [4]int32{0, 1, 2, 3}, outLen: 4}

// wideFleets exercise the multi-word bitsets, the slow paths taken beyond
// maxStackWords words, and endpoints beyond the reported range.
var wideFleets = []fleet{
	{eps: [4]int32{0, 63, 64, 130}, outLen: 131},
	{eps: [4]int32{1, 64, 700, 1100}, outLen: 800},
	{eps: [4]int32{0, 65, 1023, 1100}, outLen: 1101},
}

func (s *script) endpoint(f fleet) int32 { return f.eps[s.next(4)] }

// candidates returns a candidate mask of f.outLen endpoints, or nil.
func (s *script) candidates(f fleet) []bool {
	m := s.mask()
	if m == nil {
		return nil
	}
	c := make([]bool, f.outLen)
	for k, ep := range f.eps {
		if int(ep) < len(c) {
			c[ep] = m[k]
		}
	}
	return c
}

// naiveStore is the obvious model of BlockStore: a recency-ordered slice.
type naiveStore struct {
	capacity int
	order    []uint64 // most recent first
	holders  map[uint64][]int32
	last     map[uint64]time.Time
}

func (m *naiveStore) add(hashes []uint64, ep int32, now time.Time) {
	for _, h := range hashes {
		if i := slices.Index(m.order, h); i >= 0 {
			m.order = slices.Delete(m.order, i, i+1)
		}
		m.order = slices.Insert(m.order, 0, h)
		if !slices.Contains(m.holders[h], ep) {
			m.holders[h] = append(m.holders[h], ep)
		}
		m.last[h] = now
		for len(m.order) > m.capacity {
			m.drop(m.order[len(m.order)-1])
		}
	}
}

func (m *naiveStore) drop(h uint64) {
	m.order = slices.DeleteFunc(m.order, func(x uint64) bool { return x == h })
	delete(m.holders, h)
	delete(m.last, h)
}

// match is AIBrix's seqSearchPrefix with maps.
func (m *naiveStore) match(hashes []uint64, candidate []bool, n int) []int {
	out := make([]int, n)
	alive := map[int32]bool{}
	for ep := range int32(n) {
		if candidate == nil || candidate[ep] {
			alive[ep] = true
		}
	}
	for i, h := range hashes {
		hs, ok := m.holders[h]
		if !ok {
			break
		}
		any := false
		for ep := range alive {
			if slices.Contains(hs, ep) {
				out[ep] = i + 1
				any = true
			} else {
				delete(alive, ep)
			}
		}
		if !any {
			break
		}
	}
	return out
}

func (m *naiveStore) evictExpired(now time.Time, ttl time.Duration) int {
	n := 0
	for _, h := range slices.Clone(m.order) {
		if now.Sub(m.last[h]) > ttl {
			m.drop(h)
			n++
		}
	}
	return n
}

func (m *naiveStore) removeEndpoint(ep int32) {
	for _, h := range slices.Clone(m.order) {
		m.holders[h] = slices.DeleteFunc(m.holders[h], func(x int32) bool { return x == ep })
		if len(m.holders[h]) == 0 {
			m.drop(h)
		}
	}
}

// FuzzBlockStore runs random operations on a BlockStore and the naive model
// and compares them after every step.
func FuzzBlockStore(f *testing.F) {
	f.Add([]byte{0, 3, 1, 2, 3, 1, 0, 2, 1, 2, 5, 9, 9})
	f.Add([]byte{0, 5, 1, 2, 3, 4, 5, 2, 0, 4, 1, 2, 3, 4, 2, 3, 16, 3, 7, 200})
	f.Add([]byte("a fairly long seed so that every operation shows up at least once"))
	f.Fuzz(func(t *testing.T, in []byte) { runStoreScript(t, in, smallFleet) })
}

// runStoreScript is the body of FuzzBlockStore.
func runStoreScript(t *testing.T, in []byte, fl fleet) {
	sc := &script{b: in}
	capacity := 1 + sc.next(8)
	s, err := NewBlockStore(capacity)
	if err != nil {
		t.Fatal(err)
	}
	m := &naiveStore{capacity: capacity, holders: map[uint64][]int32{}, last: map[uint64]time.Time{}}
	now := t0
	for step := 0; sc.more(); step++ {
		now = now.Add(time.Duration(sc.next(4)) * time.Minute)
		switch sc.next(5) {
		case 0, 1:
			ep, hs := sc.endpoint(fl), sc.hashes()
			s.Add(hs, ep, now)
			m.add(hs, ep, now)
		case 2:
			ep := sc.endpoint(fl)
			s.RemoveEndpoint(ep)
			m.removeEndpoint(ep)
		case 3:
			ttl := time.Duration(sc.next(8)) * time.Minute
			if got, want := s.EvictExpired(now, ttl), m.evictExpired(now, ttl); got != want {
				t.Fatalf("step %d: EvictExpired = %d, want %d", step, got, want)
			}
		case 4:
			q, cand := sc.hashes(), sc.candidates(fl)
			got := make([]int, fl.outLen)
			s.Match(q, cand, got)
			want := m.match(q, cand, fl.outLen)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("step %d: Match(%v, %v) (-want +got):\n%s", step, q, cand, diff)
			}
			clear(got)
			if leadingRunEach(q, cand, got, s.holdersOf); !slices.Equal(want, got) {
				t.Fatalf("step %d: leadingRunEach differs from Match", step)
			}
		}
		checkStoreInvariants(t, s)
		var order []uint64
		for i := s.head; i != none; i = s.entries[i].next {
			order = append(order, s.entries[i].hash)
		}
		if diff := cmp.Diff(m.order, order, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("step %d: recency order (-want +got):\n%s", step, diff)
		}
	}
}

// naiveIndex is the obvious model of Index: one recency-ordered slice per
// endpoint.
type naiveIndex struct {
	defaultCap int
	lru        map[int32][]uint64 // most recent first
	caps       map[int32]int
}

func (m *naiveIndex) capOf(ep int32) int {
	if c, ok := m.caps[ep]; ok {
		return c
	}
	return m.defaultCap
}

func (m *naiveIndex) add(hashes []uint64, ep int32) {
	for _, h := range hashes {
		l := m.lru[ep]
		if i := slices.Index(l, h); i >= 0 {
			l = slices.Delete(l, i, i+1)
		}
		l = slices.Insert(l, 0, h)
		if len(l) > m.capOf(ep) {
			l = l[:m.capOf(ep)]
		}
		m.lru[ep] = l
	}
}

// match is GIE's matchLongestPrefix over sets derived from the LRUs.
func (m *naiveIndex) match(hashes []uint64, n int) []int {
	out := make([]int, n)
	for _, h := range hashes {
		found := false
		for ep, l := range m.lru {
			if slices.Contains(l, h) {
				found = true
				if int(ep) < n {
					out[ep]++
				}
			}
		}
		if !found {
			break
		}
	}
	return out
}

// FuzzIndex runs random operations on an Index and the naive model and
// compares them after every step.
func FuzzIndex(f *testing.F) {
	f.Add([]byte{2, 0, 0, 3, 1, 2, 3, 0, 1, 2, 1, 2, 9, 3, 4, 1, 2, 3})
	f.Add([]byte{1, 0, 1, 5, 1, 2, 3, 4, 5, 2, 1, 1, 4, 3, 3, 1, 2, 3})
	f.Add([]byte("another longish seed input that exercises every operation kind"))
	f.Fuzz(func(t *testing.T, in []byte) { runIndexScript(t, in, smallFleet) })
}

// runIndexScript is the body of FuzzIndex.
func runIndexScript(t *testing.T, in []byte, fl fleet) {
	sc := &script{b: in}
	defaultCap := 1 + sc.next(6)
	x, err := NewIndex(defaultCap)
	if err != nil {
		t.Fatal(err)
	}
	m := &naiveIndex{defaultCap: defaultCap, lru: map[int32][]uint64{}, caps: map[int32]int{}}
	for step := 0; sc.more(); step++ {
		switch sc.next(5) {
		case 0, 1:
			ep, hs := sc.endpoint(fl), sc.hashes()
			x.Add(hs, ep)
			m.add(hs, ep)
		case 2:
			ep, c := sc.endpoint(fl), 1+sc.next(6)
			if err := x.SetCapacity(ep, c); err != nil {
				t.Fatal(err)
			}
			m.caps[ep] = c
			if l := m.lru[ep]; len(l) > c {
				m.lru[ep] = l[:c]
			}
		case 3:
			ep := sc.endpoint(fl)
			x.RemoveEndpoint(ep)
			delete(m.lru, ep)
			delete(m.caps, ep)
		case 4:
			q := sc.hashes()
			n := fl.outLen - 1 // the last endpoint is held but not reported
			got := make([]int, n)
			x.Match(q, got)
			want := m.match(q, n)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("step %d: Match(%v) (-want +got):\n%s", step, q, diff)
			}
			clear(got)
			if x.matchEach(q, got); !slices.Equal(want, got) {
				t.Fatalf("step %d: matchEach differs from Match", step)
			}
		}
		checkIndexAgainst(t, x, m, fl)
	}
}

// checkIndexAgainst compares every endpoint's LRU order and the hash sets.
func checkIndexAgainst(t *testing.T, x *Index, m *naiveIndex, fl fleet) {
	t.Helper()
	distinct := map[uint64]bool{}
	for _, ep := range fl.eps {
		got := x.lru(ep)
		if diff := cmp.Diff(m.lru[ep], got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("endpoint %d LRU (-want +got):\n%s", ep, diff)
		}
		if x.Len(ep) != len(got) {
			t.Fatalf("endpoint %d: Len = %d, list has %d", ep, x.Len(ep), len(got))
		}
		for _, h := range got {
			distinct[h] = true
		}
	}
	if x.Hashes() != len(distinct) {
		t.Fatalf("Hashes = %d, want %d", x.Hashes(), len(distinct))
	}
}

// TestModelsWideFleets replays pseudo-random scripts with endpoints spread
// over several bitset words and beyond the stack-bitset limit.
func TestModelsWideFleets(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, fl := range wideFleets {
		t.Run(fmt.Sprint(fl.eps), func(t *testing.T) {
			for range 100 {
				in := make([]byte, 20+r.IntN(60))
				for i := range in {
					in[i] = byte(r.Uint32())
				}
				runStoreScript(t, in, fl)
				runIndexScript(t, in, fl)
			}
		})
	}
}

// TestIndexCompaction replays pseudo-random scripts with compaction after every few uses,
// so that the use queues are compacted, grown and wrapped around constantly, with positions
// starting just below 2³² so that they wrap too.
func TestIndexCompaction(t *testing.T) {
	defer func(f, s, r int, p uint32) {
		compactFactor, compactSlack, minRing, startPos = f, s, r, p
	}(compactFactor, compactSlack, minRing, startPos)
	compactFactor, compactSlack, minRing, startPos = 1, 1, 1, 1<<32-40
	r := rand.New(rand.NewPCG(7, 8))
	for _, fl := range append([]fleet{smallFleet}, wideFleets...) {
		for range 200 {
			in := make([]byte, 20+r.IntN(200))
			for i := range in {
				in[i] = byte(r.Uint32())
			}
			runIndexScript(t, in, fl)
		}
	}
}
