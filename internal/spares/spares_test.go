package spares

import "testing"

// TestList checks the order (newest first), that Take on an empty list is nil, and the bound.
func TestList(t *testing.T) {
	var l List[int]
	if l.Take() != nil {
		t.Fatal("empty list gave an object")
	}
	a, b := new(int), new(int)
	l.Put(a)
	l.Put(b)
	if l.Take() != b || l.Take() != a || l.Take() != nil {
		t.Fatal("want b, then a, then nil")
	}
	for range Max + 10 {
		l.Put(new(int))
	}
	n := 0
	for l.Take() != nil {
		n++
	}
	if n != Max {
		t.Fatalf("kept %d, want %d", n, Max)
	}
}
