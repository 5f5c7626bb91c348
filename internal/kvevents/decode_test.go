package kvevents

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/vmihailenco/msgpack/v5"
)

func seqTokens(from, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(from + i)
	}
	return out
}

// marshal builds a payload with msgpack's generic encoder (not Encode), as msgspec lays it out.
func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeBothEncodings(t *testing.T) {
	sha := sha256.Sum256([]byte("block"))
	toks := seqTokens(100, 32)
	anyToks := make([]any, len(toks))
	for i, v := range toks {
		anyToks[i] = v
	}
	want := Batch{TS: 1.5, DPRank: 1, Unknown: 1, Events: []Event{
		{Kind: BlockStored, Hashes: []uint64{7, xxhash.Sum64(sha[:])}, Tokens: toks, BlockSize: 16, Medium: "GPU", LoRAName: "sql-lora"},
		{Kind: BlockStored, Hashes: []uint64{9}, Parent: 7, HasParent: true, Tokens: toks[:16], BlockSize: 16},
		{Kind: BlockRemoved, Hashes: []uint64{7}, Medium: "GPU"},
		{Kind: AllBlocksCleared},
	}}
	cases := []struct {
		name    string
		payload []byte
	}{
		{"positional", marshal(t, []any{1.5, []any{
			// vLLM's field order (kv_events.py BlockStored), extra_keys and group_idx trailing.
			[]any{"BlockStored", []any{7, sha[:]}, nil, anyToks, 16, nil, "GPU", "sql-lora", []any{nil, []any{"salt", []any{1}}}, 0},
			[]any{"BlockStored", []any{uint64(9)}, 7, anyToks[:16], 16, nil, nil, nil},
			[]any{"BlockRemoved", []any{7}, "GPU"},
			[]any{"SomethingNew", 1, 2},
			[]any{"AllBlocksCleared"},
		}, 1})},
		{"named", marshal(t, map[string]any{"ts": 1.5, "data_parallel_rank": 1, "events": []any{
			map[string]any{"type": "BlockStored", "block_hashes": []any{7, sha[:]}, "parent_block_hash": nil,
				"token_ids": anyToks, "block_size": 16, "medium": "GPU", "lora_name": "sql-lora", "group_idx": 0,
				"kv_cache_spec_kind": "full_attention"},
			// the tag after the fields: msgspec writes it first, but a map has no order
			map[string]any{"block_hashes": []any{9}, "parent_block_hash": 7, "token_ids": anyToks[:16], "block_size": 16, "type": "BlockStored"},
			map[string]any{"type": "BlockRemoved", "block_hashes": []any{7}, "medium": "GPU"},
			map[string]any{"type": "SomethingNew", "x": []any{1}},
			map[string]any{"type": "AllBlocksCleared"},
		}})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.payload, DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("-want +got\n%s", d)
			}
		})
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	b := Batch{TS: 3, DPRank: -1, Events: []Event{
		{Kind: BlockStored, Hashes: []uint64{1<<63 + 5, 2}, Parent: 1 << 62, HasParent: true, Tokens: append(seqTokens(0, 7), -1), BlockSize: 4, LoRAName: "a"},
		{Kind: BlockRemoved, Hashes: []uint64{2}},
		{Kind: AllBlocksCleared},
	}}
	for _, enc := range []Encoding{Positional, Named} {
		got, err := Decode(Encode(b, enc), DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(b, got); d != "" {
			t.Errorf("encoding %d: -want +got\n%s", enc, d)
		}
	}
}

func TestDecodeHostile(t *testing.T) {
	valid := Encode(Batch{TS: 1, DPRank: 0, Events: []Event{
		{Kind: BlockStored, Hashes: []uint64{1, 2}, Tokens: seqTokens(0, 32), BlockSize: 16},
	}}, Named)
	nested := bytes.Repeat([]byte{0x91}, 1<<20) // a million nested one-element arrays
	deep := append(marshal(t, map[string]any{"ts": 1.0})[:0:0], 0x82, 0xa2, 't', 's', 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xa1, 'x')
	deep = append(deep, nested...)
	cases := []struct {
		name    string
		payload []byte
		lim     Limits
		want    error
	}{
		{"empty", nil, DefaultLimits(), ErrMalformed},
		{"not a container", []byte{0x05}, DefaultLimits(), ErrMalformed},
		{"too large", valid, Limits{MaxPayload: 10}, ErrTooLarge},
		{"too many tokens", valid, Limits{MaxTokens: 8}, ErrTooLarge},
		{"too many events", Encode(Batch{DPRank: -1, Events: make([]Event, 3)}, Positional), Limits{MaxEvents: 2}, ErrTooLarge},
		{"huge array header", []byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff}, DefaultLimits(), ErrTooLarge},
		{"deep nesting", deep, DefaultLimits(), ErrMalformed},
		// a bytes hash whose header claims 3.7 GB: refused before any allocation
		{"huge bytes hash", []byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x91, 0x92, 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd', 0x91, 0xdb, 0xdb, 0xdb, 0xdb, 0xdb}, DefaultLimits(), ErrTooLarge},
		{"tokens do not fill the blocks", marshal(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{1, 2}, 16, nil, nil, nil}}}), DefaultLimits(), ErrMalformed},
		{"negative token", marshal(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{-1}, 1, nil, nil, nil}}}), DefaultLimits(), ErrMalformed},
		{"token past 32 bits", marshal(t, []any{1.0, []any{[]any{"BlockStored", []any{1}, nil, []any{int64(1) << 32}, 1, nil, nil, nil}}}), DefaultLimits(), ErrMalformed},
		{"map event without type", marshal(t, []any{1.0, []any{map[string]any{"block_hashes": []any{1}}}}), DefaultLimits(), ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode(tc.payload, tc.lim)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("every truncation", func(t *testing.T) {
		for n := range len(valid) {
			if _, err := Decode(valid[:n], DefaultLimits()); !errors.Is(err, ErrMalformed) {
				t.Fatalf("prefix of %d bytes: err = %v, want ErrMalformed", n, err)
			}
		}
	})
}

func FuzzDecode(f *testing.F) {
	b := Batch{TS: 1, DPRank: 2, Events: []Event{
		{Kind: BlockStored, Hashes: []uint64{1, 2}, Parent: 9, HasParent: true, Tokens: seqTokens(0, 8), BlockSize: 4, Medium: "GPU"},
		{Kind: BlockRemoved, Hashes: []uint64{1}},
		{Kind: AllBlocksCleared},
	}}
	f.Add(Encode(b, Positional))
	f.Add(Encode(b, Named))
	f.Add([]byte{0x91, 0x91, 0x91})
	lim := Limits{MaxPayload: 1 << 16, MaxEvents: 64, MaxTokens: 1024}
	f.Fuzz(func(t *testing.T, payload []byte) {
		got, err := Decode(payload, lim)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if len(got.Events) > lim.MaxEvents {
			t.Fatalf("%d events past the limit", len(got.Events))
		}
		got.Unknown = 0
		for _, enc := range []Encoding{Positional, Named} { // what decodes re-encodes to the same batch
			again, err := Decode(Encode(got, enc), DefaultLimits())
			if err != nil {
				t.Fatalf("re-encoded batch: %v", err)
			}
			if d := cmp.Diff(got, again, cmpopts.EquateEmpty(), cmpopts.EquateNaNs()); d != "" {
				t.Fatalf("round trip: -first +second\n%s", d)
			}
		}
	})
}

// BenchmarkDecode decodes a batch as vLLM publishes one per engine step: a few requests'
// BlockStored (128 blocks of 16 tokens in all) and a BlockRemoved, in both encodings.
func BenchmarkDecode(b *testing.B) {
	var evs []Event
	for r := range 4 {
		hs := make([]uint64, 32)
		for i := range hs {
			hs[i] = uint64(r*1000 + i)
		}
		evs = append(evs, Event{Kind: BlockStored, Hashes: hs, Tokens: seqTokens(r, 32*16), BlockSize: 16, Medium: "GPU"})
	}
	evs = append(evs, Event{Kind: BlockRemoved, Hashes: []uint64{1, 2, 3, 4}, Medium: "GPU"})
	for _, enc := range []Encoding{Positional, Named} {
		p := Encode(Batch{TS: 1, DPRank: 0, Events: evs}, enc)
		b.Run(fmt.Sprint("encoding=", enc), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				if _, err := Decode(p, DefaultLimits()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIndexHandle applies such a batch to an index (decode, key 128 blocks, notify).
func BenchmarkIndexHandle(b *testing.B) {
	var evs []Event
	for r := range 4 {
		hs := make([]uint64, 32)
		for i := range hs {
			hs[i] = uint64(r*1000 + i)
		}
		evs = append(evs, Event{Kind: BlockStored, Hashes: hs, Tokens: seqTokens(r, 32*16), BlockSize: 16})
	}
	p := Encode(Batch{TS: 1, DPRank: -1, Events: evs}, Positional)
	x := NewIndex(DefaultIndexConfig(), DefaultLimits(), newRecorder())
	b.ReportAllocs()
	seq := uint64(0)
	for b.Loop() {
		if err := x.Handle("p", "m", seq, p, nil); err != nil {
			b.Fatal(err)
		}
		seq++
	}
}
