package engine

// prefixTable maps block hashes to blocks, keeping a request's consecutive blocks together
// in memory. Hashes are chained, so block j's hash fixes the hash of the first block of its
// group (blocks groupBlocks·⌊j/groupBlocks⌋ onwards), its anchor, and its lane j mod
// groupBlocks (blockKey). Each anchor picks a line of lineSlots slots, two cache lines: a
// group's blocks, looked up, cached and evicted together, share their cache misses. Block j
// may take one of two slots of its line, those of its lane, so a lookup compares two keys. A
// block whose two slots are taken goes to an ordinary table (over) and the line counts it, so
// lookups search over only for lines that overflowed: chains that part within a group, such
// as the requests that follow a shared system prompt ending mid-group, share an anchor and
// spill there.
//
// An entry's position is its slot in lines, or len(lines) plus its slot in over; the block
// pool records each cached block's position (onMove hears when an entry in over moves).
type prefixTable struct {
	// lines holds lineSlots slots per line. A line's first slot's aux counts its entries in
	// over, and its second slot's aux has bit i set when slot i holds an entry: both in the
	// line's first cache line, so that a lookup or insertion whose lane's first slot settles
	// it never reads the second.
	lines []hashSlot
	shift uint      // 64 − log2(number of lines)
	over  hashTable // entries whose line was full; aux is the line's first slot
	n     int
	// onMove, when set, hears that the entry of block1 − 1 moved to position pos.
	onMove func(block1 int32, pos uint32)
}

const (
	// groupBlocks is how many consecutive blocks share an anchor, and lineSlots how many
	// entries a line holds: two per lane.
	groupBlocks = 4
	lineSlots   = 2 * groupBlocks
	// usedSlot is the slot of a line whose aux marks the slots that hold entries.
	usedSlot = 1
)

// blockKey is a block hash and where the table looks for it.
type blockKey struct {
	hash, anchor uint64
	lane         uint32
}

// keyOf returns the key of block j of a sequence whose block hashes are hashes.
func keyOf(hashes []uint64, j int) blockKey {
	return blockKey{hash: hashes[j], anchor: hashes[j&^(groupBlocks-1)], lane: uint32(j & (groupBlocks - 1))}
}

// reserve sizes an empty table for n entries: lines hold four times as many, so that few
// lines hold more than one group and few entries spill (16 bytes per slot: 64 per block).
func (t *prefixTable) reserve(n int) {
	lines := 16
	for lineSlots*lines < 4*n {
		lines *= 2
	}
	t.lines = make([]hashSlot, lineSlots*lines)
	t.shift = 64
	for l := lines; l > 1; l >>= 1 {
		t.shift--
	}
	t.over.reserve(max(n/8, 64))
	t.over.onMove = func(block1 int32, i uint64) {
		if t.onMove != nil {
			t.onMove(block1, uint32(len(t.lines))+uint32(i))
		}
	}
}

// line returns the first slot of anchor's line.
func (t *prefixTable) line(anchor uint64) uint32 {
	return uint32((anchor*0x9E3779B97F4A7C15)>>(t.shift&63)) * lineSlots // shift < 64: no guard
}

// get returns the block cached under k.
func (t *prefixTable) get(k blockKey) (int32, bool) {
	l := t.line(k.anchor)
	ln := (*[lineSlots]hashSlot)(t.lines[l:])
	a := k.lane & (groupBlocks - 1)
	used := ln[usedSlot].aux
	if s := &ln[a]; used>>a&1 != 0 && s.key == k.hash {
		return s.block1 - 1, true
	}
	if s := &ln[a+groupBlocks]; used>>(a+groupBlocks)&1 != 0 && s.key == k.hash {
		return s.block1 - 1, true
	}
	if ln[0].aux == 0 {
		return 0, false
	}
	return t.over.get(k.hash)
}

// getOrPut returns the block cached under k when the table holds it; otherwise it maps k to
// block b and returns the new entry's position, reading the line once.
func (t *prefixTable) getOrPut(k blockKey, b int32) (c int32, pos uint32, found bool) {
	l := t.line(k.anchor)
	ln := (*[lineSlots]hashSlot)(t.lines[l:])
	a := k.lane & (groupBlocks - 1)
	used := &ln[usedSlot].aux
	u0, u1 := *used>>a&1 != 0, *used>>(a+groupBlocks)&1 != 0
	s0, s1 := &ln[a], &ln[a+groupBlocks]
	if u0 && s0.key == k.hash {
		return s0.block1 - 1, 0, true
	}
	if u1 && s1.key == k.hash {
		return s1.block1 - 1, 0, true
	}
	if ln[0].aux != 0 {
		if c, ok := t.over.get(k.hash); ok {
			return c, 0, true
		}
	}
	t.n++
	switch {
	case !u0:
		s0.key, s0.block1 = k.hash, b+1
		*used |= 1 << a
		return 0, l + a, false
	case !u1:
		s1.key, s1.block1 = k.hash, b+1
		*used |= 1 << (a + groupBlocks)
		return 0, l + a + groupBlocks, false
	}
	return 0, t.spill(l, k, b), false
}

// spill puts k, whose line l has both its lane's slots taken, in over; the line counts it.
// The caller has counted the entry in t.n.
func (t *prefixTable) spill(l uint32, k blockKey, b int32) uint32 {
	ln := &t.lines[l]
	ln.aux++
	if t.over.full() {
		t.over.grow()
	}
	i := t.over.put(k.hash, b)
	t.over.slots[i].aux = l
	return uint32(len(t.lines)) + uint32(i)
}

// key returns the hash of the entry at pos.
func (t *prefixTable) key(pos uint32) uint64 {
	if int(pos) < len(t.lines) {
		return t.lines[pos].key
	}
	return t.over.slots[pos-uint32(len(t.lines))].key
}

// setBlock makes the entry at pos map to block b.
func (t *prefixTable) setBlock(pos uint32, b int32) {
	if int(pos) < len(t.lines) {
		t.lines[pos].block1 = b + 1
		return
	}
	t.over.slots[pos-uint32(len(t.lines))].block1 = b + 1
}

// deleteAt removes the entry at pos.
func (t *prefixTable) deleteAt(pos uint32) {
	if int(pos) < len(t.lines) {
		t.deleteInLine(pos)
		return
	}
	t.n--
	i := uint64(pos - uint32(len(t.lines)))
	t.lines[t.over.slots[i].aux].aux--
	t.over.deleteAt(i)
}

// deleteInLine removes the entry at pos, a slot of lines. The slot's aux stays (the line's
// count or marks).
func (t *prefixTable) deleteInLine(pos uint32) {
	t.n--
	t.lines[pos].key, t.lines[pos].block1 = 0, 0
	t.lines[pos&^(lineSlots-1)+usedSlot].aux &^= 1 << (pos & (lineSlots - 1))
}

// touch reads anchor's line and returns a value made of it, which the caller keeps so that
// the read is not dropped. Reads of several lines in a row do not depend on each other, so
// the processor overlaps their cache misses, and the work that follows finds the lines
// cached instead of missing one after another.
func (t *prefixTable) touch(anchor uint64) uint64 { return t.lines[t.line(anchor)].key }

// touchChain reads the lines of a sequence's blocks, one per group (see touch).
func (t *prefixTable) touchChain(hashes []uint64) uint64 {
	var sink uint64
	for j := 0; j < len(hashes); j += groupBlocks {
		sink += t.touch(hashes[j])
	}
	return sink
}

// touchPos reads the entry at pos.
func (t *prefixTable) touchPos(pos uint32) uint64 {
	if int(pos) < len(t.lines) {
		return t.lines[pos].key
	}
	return t.over.slots[pos-uint32(len(t.lines))].key
}
