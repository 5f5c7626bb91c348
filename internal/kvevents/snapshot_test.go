package kvevents

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// An index's snapshot, written and read back, loads into another index as the same
// engine → router keys, sequence numbers and staleness.
func TestSnapshotRoundTrip(t *testing.T) {
	toks := seqTokens(0, 64)
	p := uint64(2)
	x := NewIndex(DefaultIndexConfig(), DefaultLimits(), newRecorder())
	for seq, ev := range []Event{stored([]uint64{1, 2}, nil, toks[:32]), stored([]uint64{3}, &p, toks[32:48])} {
		if err := x.Handle("a", "m", uint64(seq), payload(ev), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Handle("b", "m", 0, payload(stored([]uint64{7}, nil, toks[:16])), nil); err != nil {
		t.Fatal(err)
	}
	x.MarkStale("b")
	snap := x.Snapshot()
	snap.Endpoints[0].URL = "http://10.0.0.1:8000"
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSnapshot(&buf, DefaultSnapshotLimits())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(snap, got); d != "" {
		t.Fatalf("round trip -want +got\n%s", d)
	}
	rec := newRecorder()
	y := NewIndex(DefaultIndexConfig(), DefaultLimits(), rec)
	if n := y.Load(got); n != 4 {
		t.Errorf("Load = %d blocks, want 4", n)
	}
	if d := cmp.Diff(snap, y.Snapshot(), cmpopts.IgnoreFields(EndpointSnapshot{}, "URL")); d != "" {
		t.Errorf("loaded index -want +got\n%s", d)
	}
	if d := cmp.Diff(newRecorderKeys(x), rec.keys("a")); d != "" {
		t.Errorf("observer after Load -want +got\n%s", d)
	}
}

func newRecorderKeys(x *Index) []uint64 {
	var out []uint64
	for _, k := range x.Snapshot().Endpoints[0].Keys {
		out = append(out, k.Router)
	}
	return sorted(out)
}

func TestReadSnapshotHostile(t *testing.T) {
	lim := SnapshotLimits{MaxEndpoints: 2, MaxKeys: 4, MaxString: 8}
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"wrong magic", []byte("KVRSNAP\x02\x00")},
		{"too many replicas", append(bytes.Clone(snapshotMagic), 3)},
		{"long id", append(bytes.Clone(snapshotMagic), 1, 9, 'a')},
		{"too many blocks", append(bytes.Clone(snapshotMagic), 1, 1, 'a', 0, 0, 1, 5)},
		{"a huge claimed count, no data", append(bytes.Clone(snapshotMagic), 1, 1, 'a', 0, 0, 1, 4, 0, 0)},
		{"bad flags", append(bytes.Clone(snapshotMagic), 1, 1, 'a', 0, 0, 9, 0)},
		{"trailing data", append(bytes.Clone(snapshotMagic), 0, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadSnapshot(bytes.NewReader(tc.data), lim); !errors.Is(err, ErrSnapshot) {
				t.Errorf("err = %v, want ErrSnapshot", err)
			}
		})
	}
}

func FuzzReadSnapshot(f *testing.F) {
	var buf bytes.Buffer
	_, _ = Snapshot{Endpoints: []EndpointSnapshot{{ID: "a", URL: "u", Seq: 300, Started: true, Keys: []KeyPair{{1, 2}, {3, 4}}}, {ID: "b"}}}.WriteTo(&buf)
	f.Add(buf.Bytes())
	f.Add(append(bytes.Clone(snapshotMagic), 1, 1, 'a', 0, 0, 1, 0xff, 0xff, 0xff, 0x7f))
	lim := SnapshotLimits{MaxEndpoints: 16, MaxKeys: 1 << 16, MaxString: 64}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ReadSnapshot(bytes.NewReader(data), lim)
		if err != nil {
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		var out bytes.Buffer
		if _, err := s.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		again, err := ReadSnapshot(&out, lim)
		if err != nil {
			t.Fatalf("re-written snapshot: %v", err)
		}
		if d := cmp.Diff(s, again, cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("round trip -first +second\n%s", d)
		}
	})
}
