package kvevents

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tierLog records each observer call with its router key's position among the prompt's
// blocks and its medium.
type tierLog struct {
	pos map[uint64]int
	log []string
}

func (l *tierLog) BlockStored(ep string, h uint64, medium string) {
	l.log = append(l.log, fmt.Sprintf("+%d %s", l.pos[h], medium))
}
func (l *tierLog) BlockRemoved(ep string, h uint64, medium string) {
	l.log = append(l.log, fmt.Sprintf("-%d %s", l.pos[h], medium))
}
func (l *tierLog) AllBlocksCleared(ep string) { l.log = append(l.log, "clear") }

// TestIndexKeepsTiers checks the tier rules: a token-less store resolves the engine hashes the
// replica keyed before and joins their tier (unknown ones skipped); stores and removes count
// per (block, tier), so a chunked re-announcement needs as many removes, a removal from a tier
// that never stored the block is ignored, and a block stays keyed while any tier holds it.
func TestIndexKeepsTiers(t *testing.T) {
	toks := seqTokens(0, 32)
	gpuStore := stored([]uint64{1, 2}, nil, toks) // engine hashes 1, 2 → router keys at positions 0, 1
	cpu := func(kind Kind, medium string, hs ...uint64) Event {
		return Event{Kind: kind, Hashes: hs, BlockSize: 16, Medium: medium}
	}
	cases := []struct {
		name     string
		evs      []Event
		want     []string
		keys     int
		skipped  uint64
		snapshot int // GPU keys a snapshot carries
	}{
		{"CPU store resolves known engine hashes",
			[]Event{gpuStore, cpu(BlockStored, "CPU", 1, 2, 9)},
			[]string{"+0 GPU", "+1 GPU", "+0 CPU", "+1 CPU"}, 2, 0, 2},
		{"CPU store of unknown hashes is skipped",
			[]Event{cpu(BlockStored, "CPU", 1, 2)}, nil, 0, 1, 0},
		{"medium is normalized: empty is GPU, lower case upper-cased",
			[]Event{gpuStore, cpu(BlockStored, "cpu", 1), cpu(BlockRemoved, "", 1)},
			[]string{"+0 GPU", "+1 GPU", "+0 CPU", "-0 GPU"}, 2, 0, 1},
		{"evicted from GPU, held on CPU: still keyed, CPU removal forwarded",
			[]Event{gpuStore, cpu(BlockStored, "CPU", 1), cpu(BlockRemoved, "GPU", 1, 2), cpu(BlockRemoved, "CPU", 1)},
			[]string{"+0 GPU", "+1 GPU", "+0 CPU", "-0 GPU", "-1 GPU", "-0 CPU"}, 0, 0, 0},
		{"duplicate CPU stores need as many removes; a spare remove is ignored",
			[]Event{gpuStore, cpu(BlockStored, "CPU", 1), cpu(BlockStored, "CPU", 1),
				cpu(BlockRemoved, "CPU", 1), cpu(BlockRemoved, "CPU", 1), cpu(BlockRemoved, "CPU", 1)},
			[]string{"+0 GPU", "+1 GPU", "+0 CPU", "+0 CPU", "-0 CPU", "-0 CPU"}, 2, 0, 2},
		{"removal from a tier that never stored the block is ignored",
			[]Event{gpuStore, cpu(BlockRemoved, "CPU", 1, 2)},
			[]string{"+0 GPU", "+1 GPU"}, 2, 0, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := &tierLog{pos: map[uint64]int{}}
			x := NewIndex(DefaultIndexConfig(), DefaultLimits(), l)
			if err := x.Handle("p", "m", 0, payload(gpuStore), nil); err != nil {
				t.Fatal(err)
			}
			for ek, rk := range x.eps["p"].keys { // learn the router keys' positions, then start over
				l.pos[rk] = int(ek - 1)
			}
			x = NewIndex(DefaultIndexConfig(), DefaultLimits(), l)
			l.log = nil
			for i, ev := range tc.evs {
				if err := x.Handle("p", "m", uint64(i), payload(ev), nil); err != nil {
					t.Fatal(err)
				}
			}
			if d := cmp.Diff(tc.want, l.log); d != "" {
				t.Errorf("observer heard (-want +got):\n%s", d)
			}
			snap := x.Snapshot()
			n := 0
			for _, es := range snap.Endpoints {
				n += len(es.Keys)
			}
			if got := fmt.Sprintf("keys %d skipped %d snapshot %d", x.Keys("p"), x.Stats().Skipped, n); got != fmt.Sprintf("keys %d skipped %d snapshot %d", tc.keys, tc.skipped, tc.snapshot) {
				t.Errorf("got %s, want keys %d skipped %d snapshot %d", got, tc.keys, tc.skipped, tc.snapshot)
			}
		})
	}
}
