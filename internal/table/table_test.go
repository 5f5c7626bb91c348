package table

import (
	"math/rand/v2"
	"testing"
)

// oracle is what a Map must agree with: Go's map, plus the position of each key's entry as
// the Map reported it (Insert, Set, OnMove).
type oracle struct {
	want map[uint64]int32
	pos  map[uint64]int
}

// value is a Map value that knows its key, so that OnMove can say whose entry moved.
type value struct {
	key uint64
	v   int32
}

func newChecked() (*Map[value], *oracle) {
	m, o := &Map[value]{}, &oracle{want: map[uint64]int32{}, pos: map[uint64]int{}}
	m.OnMove = func(v *value, pos int) { o.pos[v.key] = pos }
	return m, o
}

// check compares m with o: length, every key in keys, and every recorded position.
func (o *oracle) check(t *testing.T, m *Map[value], step int, keys []uint64) {
	t.Helper()
	if m.Len() != len(o.want) {
		t.Fatalf("step %d: Len = %d, want %d", step, m.Len(), len(o.want))
	}
	for _, k := range keys {
		got, ok := m.Get(k)
		w, wok := o.want[k]
		if ok != wok || (ok && (got.v != w || got.key != k)) {
			t.Fatalf("step %d: Get(%d) = %+v %v, want %d %v", step, k, got, ok, w, wok)
		}
	}
	for k, p := range o.pos {
		if m.KeyAt(p) != k || m.At(p).key != k {
			t.Fatalf("step %d: key %d recorded at position %d, which holds key %d", step, k, p, m.KeyAt(p))
		}
	}
	n := 0
	for k, v := range m.All() {
		if v.key != k || o.want[k] != v.v {
			t.Fatalf("step %d: All yields %d: %+v, want %d", step, k, v, o.want[k])
		}
		n++
	}
	if n != len(o.want) {
		t.Fatalf("step %d: All yields %d entries, want %d", step, n, len(o.want))
	}
}

// apply runs one operation, chosen by op, on m and o.
func (o *oracle) apply(m *Map[value], op int, k uint64, v int32) {
	switch op {
	case 0: // Delete
		m.Delete(k)
		delete(o.want, k)
		delete(o.pos, k)
	case 1: // DeleteAt, through the recorded position
		if p, ok := o.pos[k]; ok {
			m.DeleteAt(p)
			delete(o.want, k)
			delete(o.pos, k)
		}
	case 2: // Insert, then write through At
		p := m.Insert(k)
		*m.At(p) = value{k, v}
		o.want[k], o.pos[k] = v, p
	default: // Set
		o.pos[k] = m.Set(k, value{k, v})
		o.want[k] = v
	}
}

// TestMapAgainstGoMap runs random operations with few distinct, badly spread keys (key 0
// among them), so that probe runs collide, wrap and shift back.
func TestMapAgainstGoMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var keys []uint64
	for k := range uint64(300) {
		keys = append(keys, k<<(k%3*20))
	}
	for round := range 20 {
		m, o := newChecked()
		for step := range 2000 {
			o.apply(m, r.IntN(6), keys[r.IntN(len(keys))], r.Int32())
			o.check(t, m, round*10000+step, keys)
		}
	}
}

// FuzzMap runs the operations a byte script names against Go's map.
func FuzzMap(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 1, 1, 0, 3, 2, 2})
	f.Add([]byte("set set set delete set delete delete get get set"))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, o := newChecked()
		keys := make([]uint64, 0, 200)
		for k := range uint64(200) {
			keys = append(keys, k*k)
		}
		for step := 0; step+1 < len(in); step += 2 {
			o.apply(m, int(in[step]%5), keys[int(in[step+1])%len(keys)], int32(step))
			o.check(t, m, step, keys)
		}
	})
}

func TestMapGrowReserveAndEmpty(t *testing.T) {
	var m Map[int32]
	if _, ok := m.Get(1); ok || m.Find(0) != nil || m.Len() != 0 || m.TouchKey(5) != 0 {
		t.Fatal("the zero Map is not empty")
	}
	m.Delete(1) // no-op on an empty table
	m.Delete(0)
	m.Reserve(1000)
	if c := m.Cap(); c < 2000 || c&(c-1) != 0 {
		t.Fatalf("Reserve(1000): %d slots, want a power of two ≥ 2000", c)
	}
	reserved := m.Cap()
	for k := range uint64(1000) {
		m.Set(k*k, int32(k))
	}
	if m.Cap() != reserved {
		t.Fatalf("the table grew from %d to %d slots within its reservation", reserved, m.Cap())
	}
	const n = 10_000
	for k := range uint64(n) {
		m.Set(k*k, int32(k))
	}
	if m.Len() != n || m.Cap() < 2*n {
		t.Fatalf("Len = %d, Cap = %d", m.Len(), m.Cap())
	}
	for k := range uint64(n) {
		if v, ok := m.Get(k * k); !ok || v != int32(k) {
			t.Fatalf("Get(%d) = %d %v", k*k, v, ok)
		}
	}
	for k := range uint64(n) {
		m.Delete(k * k)
	}
	for i, s := range m.slots {
		if s.key != 0 {
			t.Fatalf("slot %d still used after deleting every key", i)
		}
	}
	if m.Len() != 0 {
		t.Fatalf("Len = %d after deleting every key", m.Len())
	}
}
