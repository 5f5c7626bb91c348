package prefix

import "testing"

// FuzzTable runs random sets and deletes against a Go map. Keys come from a
// small range so that probe runs collide and wrap around.
func FuzzTable(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 1, 0, 3, 2, 2})
	f.Add([]byte("set set set delete set delete delete get get set"))
	f.Fuzz(func(t *testing.T, in []byte) {
		sc := &script{b: in}
		var tab table
		want := map[uint64]int32{}
		for step := 0; sc.more(); step++ {
			key := uint64(sc.next(200))
			if sc.next(3) == 0 {
				tab.del(key)
				delete(want, key)
			} else {
				v := int32(step)
				tab.set(key, v)
				want[key] = v
			}
			if tab.len() != len(want) {
				t.Fatalf("step %d: len = %d, want %d", step, tab.len(), len(want))
			}
			for k := range uint64(200) {
				got, ok := tab.get(k)
				w, wok := want[k]
				if ok != wok || got != w {
					t.Fatalf("step %d: get(%d) = %d %v, want %d %v", step, k, got, ok, w, wok)
				}
			}
		}
	})
}

func TestTableGrowAndDelete(t *testing.T) {
	var tab table
	if _, ok := tab.get(1); ok {
		t.Fatal("empty table found a key")
	}
	tab.del(1) // no-op on an empty table
	const n = 10_000
	for k := range uint64(n) {
		tab.set(k*k, int32(k))
	}
	if tab.len() != n || len(tab.slots) < 2*n {
		t.Fatalf("len = %d, slots = %d", tab.len(), len(tab.slots))
	}
	for k := range uint64(n) {
		if v, ok := tab.get(k * k); !ok || v != int32(k) {
			t.Fatalf("get(%d) = %d %v", k*k, v, ok)
		}
	}
	for k := range uint64(n) {
		tab.del(k * k)
	}
	for i, s := range tab.slots {
		if s.val1 != 0 {
			t.Fatalf("slot %d still used after deleting every key", i)
		}
	}
}
