package workloads

import (
	"strconv"
	"strings"
	"testing"
)

func TestJoinID(t *testing.T) {
	long := strings.Repeat("tenant-", 10) + "/" // longer than joinID's stack buffer
	for _, tc := range []struct {
		prefix string
		sep    byte
		n      int
	}{
		{"", 's', 0}, {"", 'r', 7}, {"s12", '.', 3}, {"chat/s4096", '.', 123456}, {long, 's', 99}, {"s1", '.', -5},
	} {
		want := tc.prefix + string(tc.sep) + strconv.Itoa(tc.n)
		if got := joinID(tc.prefix, tc.sep, tc.n); got != want {
			t.Errorf("joinID(%q, %q, %d) = %q, want %q", tc.prefix, tc.sep, tc.n, got, want)
		}
	}
}
