package hugepage

import "testing"

// TestSpan checks the huge pages a slice is rounded out to, and that slices under minBytes
// are left alone.
func TestSpan(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name       string
		start, n   uintptr
		lo, hi     uintptr
		worthwhile bool
	}{
		{"too small", 3 * mib, minBytes - 1, 0, 0, false},
		{"smallest, aligned", 4 * mib, minBytes, 4 * mib, 6 * mib, true},
		{"inside one page", 4*mib + 4096, mib, 4 * mib, 6 * mib, true},
		{"ends on a boundary", 5 * mib, mib, 4 * mib, 6 * mib, true},
		{"straddles a boundary", 5 * mib, 2 * mib, 4 * mib, 8 * mib, true},
		{"whole pages", 8 * mib, 4 * mib, 8 * mib, 12 * mib, true},
	} {
		lo, hi, ok := span(c.start, c.n)
		if ok != c.worthwhile || lo != c.lo || hi != c.hi {
			t.Errorf("%s: span(%#x, %#x) = %#x, %#x, %v; want %#x, %#x, %v",
				c.name, c.start, c.n, lo, hi, ok, c.lo, c.hi, c.worthwhile)
		}
	}
}
