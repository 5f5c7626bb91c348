package router

import "testing"

// TestPosIDs checks that a remembered position gives the interned id of the name now there:
// the same name (even another string with its bytes) keeps its id, a new name at that
// position gets its own, and a known name moved to another position keeps its id.
func TestPosIDs(t *testing.T) {
	n := newInterner()
	var c posIDs
	steps := []struct {
		pos  int
		name string
		want int32
	}{
		{0, "a", 0}, {1, "b", 1}, {0, "a", 0}, {0, string([]byte("a")), 0},
		{0, "c", 2}, {0, "a", 0}, {3, "b", 1}, {1, "c", 2},
	}
	for k, s := range steps {
		if got := c.id(&n, s.pos, s.name); got != s.want {
			t.Fatalf("step %d: id(%d, %q) = %d, want %d", k, s.pos, s.name, got, s.want)
		}
	}
}
