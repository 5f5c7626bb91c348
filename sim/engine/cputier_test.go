package engine

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestCPUTierPrepareStore checks the tier's store rules: blocks it holds are not stored
// again; room is made by evicting the least recently used free blocks only (not those being
// stored, not those pinned by a load); when that is not enough, the store is skipped and the
// tier is left as it was.
func TestCPUTierPrepareStore(t *testing.T) {
	cases := []struct {
		name        string
		capacity    int
		held        []uint64 // stored in order, then made ready unless in notReady
		notReady    []uint64
		pinned      []uint64
		store       []uint64
		wantStore   []uint64
		wantEvicted []uint64
		ok          bool
	}{
		{name: "room", capacity: 4, held: []uint64{1, 2}, store: []uint64{3, 4}, wantStore: []uint64{3, 4}, ok: true},
		{name: "held blocks are skipped", capacity: 4, held: []uint64{1, 2}, store: []uint64{2, 3}, wantStore: []uint64{3}, ok: true},
		{name: "oldest evicted", capacity: 3, held: []uint64{1, 2, 3}, store: []uint64{4, 5}, wantStore: []uint64{4, 5}, wantEvicted: []uint64{1, 2}, ok: true},
		{name: "pinned kept", capacity: 3, held: []uint64{1, 2, 3}, pinned: []uint64{1}, store: []uint64{4}, wantStore: []uint64{4}, wantEvicted: []uint64{2}, ok: true},
		{name: "being stored kept", capacity: 3, held: []uint64{1, 2, 3}, notReady: []uint64{1, 2}, store: []uint64{4}, wantStore: []uint64{4}, wantEvicted: []uint64{3}, ok: true},
		{name: "no room: skipped", capacity: 2, held: []uint64{1, 2}, pinned: []uint64{1}, notReady: []uint64{2}, store: []uint64{3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tier := newLRUTier(tc.capacity)
			tier.prepareStore(tc.held, nil, nil)
			var ready []uint64
			for _, h := range tc.held {
				if !slices.Contains(tc.notReady, h) {
					ready = append(ready, h)
				}
			}
			tier.completeStore(ready, nil)
			tier.pin(tc.pinned)
			before := tier.len()
			toStore, evicted, ok := tier.prepareStore(tc.store, nil, nil)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if diff := cmp.Diff(tc.wantStore, toStore, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("to store (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantEvicted, evicted, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("evicted (-want +got):\n%s", diff)
			}
			if !ok && tier.len() != before {
				t.Errorf("a skipped store changed the tier: %d blocks, was %d", tier.len(), before)
			}
			if n := tier.lookup(tc.wantStore); n != 0 {
				t.Errorf("%d blocks being stored are hits, want none before completeStore", n)
			}
		})
	}
}

// TestCheckEviction checks the eviction policy names the CPU tier takes and that a wrong one
// is reported under the sweep file's key, which callers prefix with their section.
func TestCheckEviction(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string // the error, or "" for none
	}{
		{"", ""},
		{EvictionLRU, ""},
		{EvictionARC, ""},
		{"lfu", `kv_offloading_eviction_policy "lfu": want lru or arc`},
		{"LRU", `kv_offloading_eviction_policy "LRU": want lru or arc`},
	} {
		got := ""
		if err := CheckEviction(tc.name); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("CheckEviction(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
