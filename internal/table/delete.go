package table

// Delete removes key's entry, if any.
func (m *Map[V]) Delete(key uint64) {
	if key == 0 {
		m.hasZero, m.zero = false, slot[V]{}
		return
	}
	if m.n == 0 {
		return
	}
	mask := uint64(len(m.slots) - 1)
	i := m.home(key)
	for ; m.slots[i].key != key; i = (i + 1) & mask {
		if m.slots[i].key == 0 {
			return
		}
	}
	m.DeleteAt(int(i))
}

// DeleteAt removes the entry at pos, which must hold one, shifting later members of its
// probe run back so that lookups never need tombstones.
func (m *Map[V]) DeleteAt(pos int) {
	if pos == len(m.slots) {
		m.hasZero, m.zero = false, slot[V]{}
		return
	}
	mask := uint64(len(m.slots) - 1)
	i := uint64(pos)
	for j := (i + 1) & mask; m.slots[j].key != 0; j = (j + 1) & mask {
		// Move j back into the hole at i unless its home lies cyclically in (i, j].
		if h := m.home(m.slots[j].key); (j-h)&mask >= (j-i)&mask {
			m.slots[i] = m.slots[j]
			if m.OnMove != nil {
				m.OnMove(&m.slots[i].val, int(i))
			}
			i = j
		}
	}
	m.slots[i] = slot[V]{}
	m.n--
}
