package engine

import "math/bits"

// hashTable maps block hashes to blocks: open addressing with linear probing, load factor at
// most 1/2. Keys are already well-mixed 64-bit hashes; a lookup usually touches one cache
// line, where a Go map touches two or three. The block pool leaves an evicted block's entry
// and each block records its entry's slot (onMove keeps the records when entries move), so an
// evicted block's entry is removed at once, without a lookup.
type hashTable struct {
	slots []hashSlot // len is a power of two, or 0
	shift uint       // 64 − log2(len(slots))
	n     int
	// onMove, when set, hears that the entry of block1 − 1 moved to slot i.
	onMove func(block1 int32, i uint64)
}

// hashSlot holds a key and its block plus one; 0 marks an empty slot. aux is the owner's
// (prefixTable): it fills what would be padding.
type hashSlot struct {
	key    uint64
	block1 int32
	aux    uint32
}

// home returns key's preferred slot; the multiplication spreads keys that are not uniform.
func (t *hashTable) home(key uint64) uint64 { return (key * 0x9E3779B97F4A7C15) >> t.shift }

// get returns the block cached under key.
func (t *hashTable) get(key uint64) (int32, bool) {
	if t.n == 0 {
		return 0, false
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.home(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.block1 == 0 {
			return 0, false
		}
		if s.key == key {
			return s.block1 - 1, true
		}
	}
}

// put maps key to block b, replacing any value key had, and returns the slot of the entry.
// The caller makes room first (full, grow).
func (t *hashTable) put(key uint64, b int32) uint64 {
	mask := uint64(len(t.slots) - 1)
	i := t.home(key)
	for ; t.slots[i].block1 != 0; i = (i + 1) & mask {
		if t.slots[i].key == key {
			t.slots[i].block1 = b + 1
			return i
		}
	}
	t.slots[i] = hashSlot{key: key, block1: b + 1}
	t.n++
	return i
}

// full reports whether one more key would take the load factor above 1/2.
func (t *hashTable) full() bool { return 2*(t.n+1) > len(t.slots) }

// deleteAt empties slot i, shifting later members of its probe run back so that lookups
// never need tombstones.
func (t *hashTable) deleteAt(i uint64) {
	mask := uint64(len(t.slots) - 1)
	for j := (i + 1) & mask; t.slots[j].block1 != 0; j = (j + 1) & mask {
		// Move j back into the hole at i unless its home lies cyclically in (i, j].
		if h := t.home(t.slots[j].key); (j-h)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			if t.onMove != nil {
				t.onMove(t.slots[i].block1, i)
			}
			i = j
		}
	}
	t.slots[i] = hashSlot{}
	t.n--
}

// reserve sizes an empty table for n keys, so that it never grows on the way to them.
func (t *hashTable) reserve(n int) {
	size := 64
	for 2*n > size {
		size *= 2
	}
	t.resize(size)
}

// grow doubles the table (or allocates it) and reinserts every key.
func (t *hashTable) grow() { t.resize(max(2*len(t.slots), 64)) }

// resize moves the table's keys to an array of size slots (a power of two).
func (t *hashTable) resize(size int) {
	old := t.slots
	t.slots = make([]hashSlot, size)
	t.shift = uint(64 - bits.TrailingZeros(uint(size)))
	t.n = 0
	for _, s := range old {
		if s.block1 != 0 {
			i := t.put(s.key, s.block1-1)
			t.slots[i].aux = s.aux
			if t.onMove != nil {
				t.onMove(s.block1, i)
			}
		}
	}
}
