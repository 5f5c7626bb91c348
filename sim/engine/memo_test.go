package engine

import "testing"

// TestTakeHashesReusesOnlyLargeEnough checks that takeHashes hands out a spare hash array only
// when it has room for the hashes asked for, empty, and each spare once.
func TestTakeHashesReusesOnlyLargeEnough(t *testing.T) {
	m := NewHashMemo(1)
	small, large := make([]uint64, 3, 4), make([]uint64, 5, 16)
	m.release(large)
	m.release(small)
	m.release(nil) // nothing to keep
	if len(m.spare) != 2 {
		t.Fatalf("%d spares, want 2", len(m.spare))
	}
	for _, tc := range []struct {
		n    int
		want *uint64 // the array handed out; nil: a new one
	}{{8, &large[:1][0]}, {8, nil}, {2, &small[:1][0]}, {1, nil}} {
		h := m.takeHashes(tc.n)
		if len(h) != 0 || cap(h) < tc.n {
			t.Fatalf("takeHashes(%d): len %d cap %d", tc.n, len(h), cap(h))
		}
		if got := &h[:1][0]; (tc.want == nil) != (got != &large[:1][0] && got != &small[:1][0]) ||
			(tc.want != nil && got != tc.want) {
			t.Fatalf("takeHashes(%d) handed out the wrong array", tc.n)
		}
	}
}
