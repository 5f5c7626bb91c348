package kvevents

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/router/prefix"
)

// recorder is an Observer that keeps each endpoint's set of router keys.
type recorder struct{ held map[string]map[uint64]bool }

func newRecorder() *recorder { return &recorder{held: map[string]map[uint64]bool{}} }

func (r *recorder) BlockStored(ep string, h uint64, _ string) {
	if r.held[ep] == nil {
		r.held[ep] = map[uint64]bool{}
	}
	r.held[ep][h] = true
}
func (r *recorder) BlockRemoved(ep string, h uint64, _ string) { delete(r.held[ep], h) }
func (r *recorder) AllBlocksCleared(ep string)                 { delete(r.held, ep) }

func (r *recorder) keys(ep string) []uint64 {
	var out []uint64
	for h := range r.held[ep] {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

func sorted(h []uint64) []uint64 { h = slices.Clone(h); slices.Sort(h); return h }

func stored(hashes []uint64, parent *uint64, toks []int32) Event {
	ev := Event{Kind: BlockStored, Hashes: hashes, Tokens: toks, BlockSize: 16}
	if parent != nil {
		ev.Parent, ev.HasParent = *parent, true
	}
	return ev
}

func payload(evs ...Event) []byte { return Encode(Batch{TS: 1, DPRank: -1, Events: evs}, Named) }

// The router keys of stored blocks are the keys a request with the same tokens looks up,
// whatever the engine's own hashes are, across events that split one request's blocks.
func TestIndexKeysMatchRequestKeys(t *testing.T) {
	rec := newRecorder()
	x := NewIndex(DefaultIndexConfig(), DefaultLimits(), rec)
	toks := seqTokens(1000, 64)
	p := uint64(0xa2)
	for seq, ev := range []Event{
		stored([]uint64{0xa1, 0xa2}, nil, toks[:32]),
		stored([]uint64{0xa3, 0xa4}, &p, toks[32:64]),
	} {
		if err := x.Handle("pod-a", "llama", uint64(seq), payload(ev), nil); err != nil {
			t.Fatal(err)
		}
	}
	want := prefix.AppendTokenBlockHashes(nil, prefix.ModelSalt("llama"), toks, 16)
	if d := cmp.Diff(sorted(want), rec.keys("pod-a")); d != "" {
		t.Fatalf("router keys -want +got\n%s", d)
	}
	// BlockRemoved carries only engine keys: the index maps them back.
	if err := x.Handle("pod-a", "llama", 2, payload(Event{Kind: BlockRemoved, Hashes: []uint64{0xa4, 0xa3, 0xff}}), nil); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(sorted(want[:2]), rec.keys("pod-a")); d != "" {
		t.Fatalf("after removal -want +got\n%s", d)
	}
	if got := x.Keys("pod-a"); got != 2 {
		t.Errorf("Keys = %d, want 2", got)
	}
	// A parent hash of 0 never stored is "no parent", as llm-d-inference-sim writes it.
	zero := uint64(0)
	rec2 := newRecorder()
	x2 := NewIndex(DefaultIndexConfig(), DefaultLimits(), rec2)
	if err := x2.Handle("pod-b", "llama", 0, payload(stored([]uint64{0xc1, 0xc2}, &zero, toks[:32])), nil); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(sorted(want[:2]), rec2.keys("pod-b")); d != "" {
		t.Fatalf("parent 0: -want +got\n%s", d)
	}
	// A LoRA adapter's blocks are keyed by the adapter's name, as its requests are.
	lora := stored([]uint64{0xb1}, nil, toks[:16])
	lora.LoRAName = "sql"
	if err := x.Handle("pod-a", "llama", 3, payload(lora), nil); err != nil {
		t.Fatal(err)
	}
	if !rec.held["pod-a"][prefix.AppendTokenBlockHashes(nil, prefix.ModelSalt("sql"), toks[:16], 16)[0]] {
		t.Error("the adapter's block is not under the adapter's key")
	}
}

func TestIndexSequence(t *testing.T) {
	toks := seqTokens(0, 64)
	p0 := uint64(1)
	msgs := [][]byte{
		payload(stored([]uint64{1}, nil, toks[:16])),
		payload(stored([]uint64{2}, &p0, toks[16:32])),
		payload(Event{Kind: BlockRemoved, Hashes: []uint64{1}}),
		payload(stored([]uint64{1}, nil, toks[:16])),
	}
	replay := func(g Gap) ([][]byte, error) { return msgs[g.From:g.To], nil }
	broken := func(Gap) ([][]byte, error) { return nil, errors.New("gone") }
	cases := []struct {
		name      string
		seqs      []uint64
		fill      Filler
		wantKeys  int
		wantStale bool
		wantStats string // gaps replayed restarts
	}{
		{"in order", []uint64{0, 1, 2, 3}, nil, 2, false, "0 0 0"},
		{"gap replayed in order", []uint64{0, 3}, replay, 2, false, "1 2 0"},
		{"gap without replay", []uint64{0, 3}, nil, 1, true, "1 0 0"},
		{"replay fails", []uint64{0, 3}, broken, 1, true, "1 0 0"},
		{"restart starts clean", []uint64{0, 1, 0}, nil, 1, false, "0 0 1"},
		{"a late first message: the history is missed", []uint64{3}, nil, 1, true, "0 0 0"},
		{"llm-d-inference-sim numbers from 1", []uint64{1}, nil, 0, false, "0 0 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x := NewIndex(DefaultIndexConfig(), DefaultLimits(), newRecorder())
			for _, s := range tc.seqs {
				err := x.Handle("p", "m", s, msgs[s], tc.fill)
				if err != nil && !tc.wantStale {
					t.Fatalf("seq %d: err = %v", s, err)
				}
			}
			st := x.Stats()
			got := fmt.Sprintf("keys %d stale %v stats %d %d %d", x.Keys("p"), len(x.Stale()) > 0, st.Gaps, st.Replayed, st.Restarts)
			want := fmt.Sprintf("keys %d stale %v stats %s", tc.wantKeys, tc.wantStale, tc.wantStats)
			if got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
	t.Run("stale until cleared", func(t *testing.T) {
		x := NewIndex(DefaultIndexConfig(), DefaultLimits(), newRecorder())
		x.MarkStale("p")
		if d := cmp.Diff([]string{"p"}, x.Stale()); d != "" {
			t.Fatal(d)
		}
		if err := x.Handle("p", "m", 0, payload(Event{Kind: AllBlocksCleared}), nil); err != nil {
			t.Fatal(err)
		}
		if got := x.Stale(); len(got) != 0 {
			t.Errorf("stale after AllBlocksCleared: %v", got)
		}
	})
}

// A message whose payload does not decode changes nothing: not the sequence number (an old
// one would otherwise clear the replica's blocks, a later one open a gap), not the index.
func TestIndexUndecodableChangesNothing(t *testing.T) {
	toks := seqTokens(0, 32)
	garbage := []byte{0xc1, 0xde, 0xad}
	for _, tc := range []struct {
		name string
		seq  uint64
	}{
		{"older sequence number", 0},
		{"same sequence number", 1},
		{"later sequence number, a gap", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			x := NewIndex(DefaultIndexConfig(), DefaultLimits(), rec)
			// Numbered 1, the stream's start: a later first number would mark the replica stale.
			if err := x.Handle("p", "m", 1, payload(stored([]uint64{1, 2}, nil, toks)), nil); err != nil {
				t.Fatal(err)
			}
			if err := x.Handle("p", "m", tc.seq, garbage, nil); err == nil {
				t.Fatal("garbage decoded")
			}
			if err := x.Handle("p", "m", 2, payload(Event{Kind: BlockRemoved, Hashes: []uint64{2}}), nil); err != nil {
				t.Fatalf("the next message after the garbage: %v", err)
			}
			st := x.Stats()
			got := fmt.Sprintf("keys %d observed %d stale %v dropped %d restarts %d gaps %d",
				x.Keys("p"), len(rec.keys("p")), len(x.Stale()) > 0, st.Dropped, st.Restarts, st.Gaps)
			if want := "keys 1 observed 1 stale false dropped 1 restarts 0 gaps 0"; got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestIndexSkipsAndBounds(t *testing.T) {
	toks := seqTokens(0, 64)
	orphanParent := uint64(99)
	cpu := stored([]uint64{5}, nil, toks[:16])
	cpu.Medium = "CPU"
	odd := stored([]uint64{6}, nil, toks[:32])
	odd.BlockSize = 32
	rec := newRecorder()
	cfg := DefaultIndexConfig()
	cfg.MaxKeysPerEndpoint = 3
	x := NewIndex(cfg, DefaultLimits(), rec)
	for seq, p := range [][]byte{
		payload(stored([]uint64{1}, &orphanParent, toks[:16])), // parent never seen
		payload(cpu), // a self-describing CPU store: kept in its tier
		payload(odd), // another block size
		{0xc1},       // garbage
		payload(stored([]uint64{1, 2, 3, 4}, nil, toks)), // more than the bound
	} {
		err := x.Handle("p", "m", uint64(seq), p, nil)
		if seq == 3 && !errors.Is(err, ErrMalformed) {
			t.Errorf("garbage: err = %v", err)
		}
	}
	st := x.Stats()
	got := fmt.Sprintf("skipped %d dropped %d keys %d held %d stale %v", st.Skipped, st.Dropped, x.Keys("p"), len(rec.keys("p")), x.Stale())
	if want := "skipped 2 dropped 2 keys 0 held 0 stale [p]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// counter is a BatchObserver that counts stores and removals per router key, as an
// observer that reference-counts them (router's precise-prefix) sees them.
type counter struct {
	stores, removes map[uint64]int
	events          [][]uint64
	parents         []bool
}

func (c *counter) BlockStored(_ string, h uint64, _ string)  { c.stores[h]++ }
func (c *counter) BlockRemoved(_ string, h uint64, _ string) { c.removes[h]++ }
func (c *counter) AllBlocksCleared(string)                   {}
func (c *counter) BlocksStored(_ string, hs []uint64, _ uint64, hasParent bool, _ string) {
	c.events = append(c.events, slices.Clone(hs))
	c.parents = append(c.parents, hasParent)
	for _, h := range hs {
		c.stores[h]++
	}
}

// A block stored twice (vLLM's duplicate blocks, or offload chunks) is removed twice: each
// removal is forwarded, and the engine key is forgotten after the last. An observer that
// takes events whole gets each BlockStored event as one call.
func TestIndexForwardsEveryRemovalOfAStoredBlock(t *testing.T) {
	c := &counter{stores: map[uint64]int{}, removes: map[uint64]int{}}
	x := NewIndex(DefaultIndexConfig(), DefaultLimits(), c)
	toks := seqTokens(1000, 32)
	p := uint64(0xa1)
	for seq, ev := range []Event{
		stored([]uint64{0xa1}, nil, toks[:16]),
		stored([]uint64{0xa2}, &p, toks[16:32]),
		stored([]uint64{0xa2}, &p, toks[16:32]),
		{Kind: BlockRemoved, Hashes: []uint64{0xa2, 0xa2, 0xa2}},
	} {
		if err := x.Handle("pod-a", "llama", uint64(seq), payload(ev), nil); err != nil {
			t.Fatal(err)
		}
	}
	keys := prefix.AppendTokenBlockHashes(nil, prefix.ModelSalt("llama"), toks, 16)
	if c.stores[keys[1]] != 2 || c.removes[keys[1]] != 2 {
		t.Errorf("block 2: %d stores, %d removals forwarded; want 2 and 2", c.stores[keys[1]], c.removes[keys[1]])
	}
	if got := x.Keys("pod-a"); got != 1 {
		t.Errorf("Keys = %d, want 1 (the second block forgotten)", got)
	}
	if want := [][]uint64{keys[:1], keys[1:], keys[1:]}; !cmp.Equal(want, c.events) || !slices.Equal(c.parents, []bool{false, true, true}) {
		t.Errorf("events %x (parents %v), want %x", c.events, c.parents, want)
	}
}
