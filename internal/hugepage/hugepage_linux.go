package hugepage

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// size is the huge page size on the architectures Go supports on Linux with transparent huge
// pages (x86-64, arm64 with 4 KiB base pages).
const size = 2 << 20

// Advise asks that the memory under s, rounded out to whole huge pages, be backed by huge
// pages: from now on (MADV_HUGEPAGE) and, where the kernel can do it at once, already
// (MADV_COLLAPSE, Linux 6.1 and later), since memory the Go heap reuses was faulted in small
// pages before. Slices under 256 KiB are left as they are. It returns the error of
// MADV_HUGEPAGE (EINVAL when the kernel has no transparent huge pages); a collapse that fails
// (no free huge page, an older kernel) is not an error: the memory then becomes huge as the
// kernel's khugepaged gets to it.
func Advise[T any](s []T) error {
	var zero T
	n := uintptr(len(s)) * unsafe.Sizeof(zero)
	if n < minBytes {
		return nil
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	lo, hi := start&^(size-1), (start+n+size-1)&^(size-1)
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_HUGEPAGE); errno != 0 {
		return errno
	}
	unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_COLLAPSE)
	return nil
}
