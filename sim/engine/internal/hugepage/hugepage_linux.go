package hugepage

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Advise asks that the memory under s, rounded out to whole huge pages, be backed by huge
// pages: from now on (MADV_HUGEPAGE) and, where the kernel can do it at once, already
// (MADV_COLLAPSE, Linux 6.1 and later), since memory the Go heap reuses was faulted in small
// pages before. Slices under 256 KiB are left as they are. It returns the error of
// MADV_HUGEPAGE (EINVAL when the kernel has no transparent huge pages); a collapse that fails
// (no free huge page, an older kernel) is not an error: the memory then becomes huge as the
// kernel's khugepaged gets to it.
func Advise[T any](s []T) error {
	var zero T
	lo, hi, ok := span(uintptr(unsafe.Pointer(unsafe.SliceData(s))), uintptr(len(s))*unsafe.Sizeof(zero))
	if !ok {
		return nil
	}
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_HUGEPAGE); errno != 0 {
		return errno
	}
	unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_COLLAPSE)
	return nil
}
