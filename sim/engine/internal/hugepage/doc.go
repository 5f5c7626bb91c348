// Package hugepage asks the operating system to back large, randomly read tables with huge
// pages (on Linux, transparent huge pages: 2 MiB on x86-64 instead of 4 KiB).
//
// A simulated replica's KV block pool is a few MiB of tables read at random (block states, the
// prefix-cache table, the free queue), and a fleet of eight over 10 MiB: more than the
// 4 KiB pages a processor's TLB maps (2,048 entries, 8 MiB, on a Zen 3 core), so many reads
// first walk the page tables, which costs most inside a virtual machine. With 2 MiB pages the
// TLB maps them all. Linux hands out huge pages unasked only when transparent huge pages are
// "always" on; most distributions ship "madvise", which serves only memory that asks
// (MADV_HUGEPAGE), and the Go runtime does not ask for its heap.
//
// Advice changes where memory lives, never what it holds, so it is safe on any Go memory.
package hugepage

const (
	// size is the huge page size on the architectures Go supports on Linux with transparent
	// huge pages (x86-64, arm64 with 4 KiB base pages).
	size = 2 << 20
	// minBytes is the smallest slice worth advising: below it the slice spans at most 64
	// small pages, which the TLB maps anyway, and advising its 2 MiB neighbourhood would only
	// add memory.
	minBytes = 256 << 10
)

// span returns the whole huge pages [lo, hi) that hold the n bytes at start, and false when
// n is too small to be worth advising.
func span(start, n uintptr) (lo, hi uintptr, ok bool) {
	if n < minBytes {
		return 0, 0, false
	}
	return start &^ (size - 1), (start + n + size - 1) &^ (size - 1), true
}
