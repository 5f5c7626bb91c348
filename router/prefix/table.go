package prefix

// table is an open-addressing hash table from block hash to slot index,
// specialised for the hot paths: keys are already well-mixed 64-bit hashes,
// values are small non-negative integers, and a lookup touches one cache
// line in the common case (a Go map touches two or three). Linear probing
// with backward-shift deletion keeps it free of tombstones; the load factor
// stays at or below 1/2.
type table struct {
	slots []tableSlot // len is a power of two, or 0
	shift uint        // 64 - log2(len(slots))
	n     int
}

// tableSlot holds one key and its value plus one; 0 marks an empty slot, so
// freshly allocated memory is an empty table.
type tableSlot struct {
	key  uint64
	val1 int32
}

// minTableSlots is the size of a table's first allocation.
const minTableSlots = 64

// home returns the preferred slot of key. The multiplication spreads keys
// that are not uniformly distributed (such as small test values).
func (t *table) home(key uint64) uint64 {
	return (key * 0x9E3779B97F4A7C15) >> t.shift
}

// len returns the number of keys.
func (t *table) len() int { return t.n }

// get returns the value of key.
func (t *table) get(key uint64) (int32, bool) {
	if t.n == 0 {
		return 0, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.val1 == 0 {
			return 0, false
		}
		if s.key == key {
			return s.val1 - 1, true
		}
	}
}

// set maps key to val (val >= 0), replacing any previous value.
func (t *table) set(key uint64, val int32) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.val1 == 0 {
			s.key, s.val1 = key, val+1
			t.n++
			return
		}
		if s.key == key {
			s.val1 = val + 1
			return
		}
	}
}

// del removes key if present, shifting later members of its probe run back
// so that lookups never need tombstones.
func (t *table) del(key uint64) {
	if t.n == 0 {
		return
	}
	mask := uint64(len(t.slots) - 1)
	i := t.home(key)
	for ; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.val1 == 0 {
			return
		}
		if s.key == key {
			break
		}
	}
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		s := t.slots[j]
		if s.val1 == 0 {
			break
		}
		// Move s back to the hole at i unless its home lies cyclically in
		// (i, j], in which case it must stay where it is.
		if h := t.home(s.key); (j-h)&mask >= (j-i)&mask {
			t.slots[i] = s
			i = j
		}
	}
	t.slots[i] = tableSlot{}
	t.n--
}

// grow doubles the table (or allocates it) and reinserts every key.
func (t *table) grow() {
	old := t.slots
	size := max(2*len(old), minTableSlots)
	t.slots = make([]tableSlot, size)
	t.shift = 64
	for s := size; s > 1; s >>= 1 {
		t.shift--
	}
	t.n = 0
	for _, s := range old {
		if s.val1 != 0 {
			t.set(s.key, s.val1-1)
		}
	}
}
