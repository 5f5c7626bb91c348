package hugepage

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestAdviseMarksMapping checks that Advise leaves the mapping under a large slice marked for
// huge pages ("hg" in its VmFlags, /proc/self/smaps) and its contents as they were.
func TestAdviseMarksMapping(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skip("no transparent huge pages here")
	}
	big := make([]uint64, 4<<20/8)
	if err := Advise(big); err != nil {
		t.Fatalf("Advise: %v", err)
	}
	flags := vmFlags(t, uintptr(unsafe.Pointer(&big[0])))
	if !strings.Contains(" "+flags+" ", " hg ") {
		t.Errorf("mapping of a 4 MiB slice: VmFlags %q, want hg", flags)
	}
	for i := range big { // the contents are untouched and still writable
		if big[i] != 0 {
			t.Fatalf("big[%d] = %d after Advise", i, big[i])
		}
		big[i] = uint64(i)
	}
}

// vmFlags returns the VmFlags line of the mapping in /proc/self/smaps that holds addr.
func vmFlags(t *testing.T, addr uintptr) string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := rangeOf(line); ok {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmFlags:"))
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return ""
}

// rangeOf parses a mapping header line of smaps ("lo-hi perms ...").
func rangeOf(line string) (lo, hi uintptr, ok bool) {
	field, _, _ := strings.Cut(line, " ")
	a, b, found := strings.Cut(field, "-")
	if !found {
		return 0, 0, false
	}
	l, err1 := strconv.ParseUint(a, 16, 64)
	h, err2 := strconv.ParseUint(b, 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uintptr(l), uintptr(h), true
}
