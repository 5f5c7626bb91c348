package table

// Map maps uint64 keys to values of type V. It probes linearly, deletes by shifting later
// members of a probe run back (no tombstones) and keeps its load factor at or below 1/2.
// Key 0 marks an empty slot, so that freshly allocated memory is an empty table; the entry
// of key 0 itself, if any, is kept beside the slots.
//
// Each entry has a position, an int in [0, Cap()]: its slot, or Cap() for key 0's entry.
// Positions change when the table grows and when a deletion shifts a probe run back; OnMove,
// when set, hears each such move. The zero Map is empty and ready to use.
type Map[V any] struct {
	slots   []slot[V] // len is a power of two, or 0
	shift   uint      // 64 − log2(len(slots))
	n       int       // entries in slots
	zero    slot[V]   // key 0's entry when hasZero
	hasZero bool
	// OnMove, when set, hears that the entry whose value is v moved to position pos.
	OnMove func(v *V, pos int)
}

type slot[V any] struct {
	key uint64
	val V
}

// minSlots is the size of a table's first allocation.
const minSlots = 64

// home returns key's preferred slot; the multiplication (Fibonacci hashing) spreads keys
// that are not uniform, such as small test values.
func (m *Map[V]) home(key uint64) uint64 { return (key * 0x9E3779B97F4A7C15) >> m.shift }

// Len returns the number of entries.
func (m *Map[V]) Len() int {
	if m.hasZero {
		return m.n + 1
	}
	return m.n
}

// Cap returns the number of slots, which is also key 0's position.
func (m *Map[V]) Cap() int { return len(m.slots) }

// Find returns a pointer to key's value, or nil when key is absent. The pointer is valid
// until the next insertion or deletion.
func (m *Map[V]) Find(key uint64) *V {
	if key == 0 {
		if m.hasZero {
			return &m.zero.val
		}
		return nil
	}
	if m.n == 0 {
		return nil
	}
	mask := uint64(len(m.slots) - 1)
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.key == key {
			return &s.val
		}
		if s.key == 0 {
			return nil
		}
	}
}

// Get returns key's value.
func (m *Map[V]) Get(key uint64) (V, bool) {
	if p := m.Find(key); p != nil {
		return *p, true
	}
	var zero V
	return zero, false
}

// Set maps key to v, replacing any value key had, and returns the entry's position.
func (m *Map[V]) Set(key uint64, v V) int {
	pos := m.Insert(key)
	*m.At(pos) = v
	return pos
}

// Insert returns the position of key's entry, adding one with the zero value when key is
// absent (which may grow the table).
func (m *Map[V]) Insert(key uint64) int {
	if key == 0 {
		if !m.hasZero {
			m.hasZero, m.zero = true, slot[V]{}
		}
		return len(m.slots)
	}
	if 2*(m.n+1) > len(m.slots) {
		m.resize(max(2*len(m.slots), minSlots))
	}
	mask := uint64(len(m.slots) - 1)
	i := m.home(key)
	for ; m.slots[i].key != 0; i = (i + 1) & mask {
		if m.slots[i].key == key {
			return int(i)
		}
	}
	m.slots[i] = slot[V]{key: key}
	m.n++
	return int(i)
}

// At returns a pointer to the value of the entry at pos, valid until the next insertion or
// deletion.
func (m *Map[V]) At(pos int) *V {
	if pos == len(m.slots) {
		return &m.zero.val
	}
	return &m.slots[pos].val
}

// KeyAt returns the key of the entry at pos.
func (m *Map[V]) KeyAt(pos int) uint64 {
	if pos == len(m.slots) {
		return 0
	}
	return m.slots[pos].key
}
