package table

import (
	"iter"
	"math/bits"
)

// Reserve grows the table, if needed, so that it holds n entries without growing again.
func (m *Map[V]) Reserve(n int) {
	size := max(len(m.slots), minSlots)
	for 2*n > size {
		size *= 2
	}
	if size > len(m.slots) {
		m.resize(size)
	}
}

// resize moves the entries to an array of size slots (a power of two) and tells OnMove
// where each one went, key 0's included (its position is the new Cap).
func (m *Map[V]) resize(size int) {
	old := m.slots
	m.slots = make([]slot[V], size)
	m.shift = uint(64 - bits.TrailingZeros(uint(size)))
	mask := uint64(size - 1)
	for _, s := range old {
		if s.key == 0 {
			continue
		}
		i := m.home(s.key)
		for m.slots[i].key != 0 {
			i = (i + 1) & mask
		}
		m.slots[i] = s
		if m.OnMove != nil {
			m.OnMove(&m.slots[i].val, int(i))
		}
	}
	if m.hasZero && m.OnMove != nil {
		m.OnMove(&m.zero.val, size)
	}
}

// Touch reads the home slot of each key and returns a value made of them, which the caller
// keeps so that the reads are not dropped. The reads do not depend on each other, so the
// processor overlaps their cache misses; lookups that follow find the slots cached instead
// of missing one after another.
func (m *Map[V]) Touch(keys []uint64) uint64 {
	var sink uint64
	for _, k := range keys {
		sink += m.TouchKey(k)
	}
	return sink
}

// TouchKey reads the home slot of key (see Touch).
func (m *Map[V]) TouchKey(key uint64) uint64 {
	if len(m.slots) == 0 {
		return 0
	}
	return m.slots[m.home(key)].key
}

// All yields every entry's key and a pointer to its value, in slot order (key 0 last). The
// table must not change during the iteration.
func (m *Map[V]) All() iter.Seq2[uint64, *V] {
	return func(yield func(uint64, *V) bool) {
		for i := range m.slots {
			if s := &m.slots[i]; s.key != 0 && !yield(s.key, &s.val) {
				return
			}
		}
		if m.hasZero {
			yield(0, &m.zero.val)
		}
	}
}
