package engine

import "kvroute/internal/table"

// prefixTable maps block hashes to blocks, keeping a request's consecutive blocks together
// in memory. Hashes are chained, so block j's hash fixes the hash of the first block of its
// group (blocks groupBlocks·⌊j/groupBlocks⌋ onwards), its anchor, and its lane j mod
// groupBlocks (blockKey). Each anchor picks a line of lineSlots slots of 8 bytes: the first
// slot of every lane in the line's first cache line, the second slot in its second. A
// group's blocks, looked up, cached and evicted together, share their cache misses, and a
// lookup or insertion whose lane's first slot settles it reads one cache line.
//
// A slot holds a tag, 24 bits of its block's hash, and the block: a lookup whose tag matches
// compares the full hash, which the block's state records (block.hash) and which a hit reads
// anyway. The first slot's tag says whether the second is taken (secondBit), so that a lookup
// whose lane's first slot settles it never reads the line's second cache line. A block whose
// two slots are taken goes to an ordinary table (over) and its lane's first slot counts it in
// its tag, so lookups search over only for lanes that overflowed: chains that part within a
// group, such as the requests that follow a shared system prompt ending mid-group, share an
// anchor and spill there.
//
// An entry's position is its slot in lines, or len(lines) plus its slot in over; the block
// pool records each cached block's position (onMove hears when an entry in over moves).
type prefixTable struct {
	lines  []lineSlot
	shift  uint                 // 64 − log2(number of lines)
	over   table.Map[overEntry] // entries whose lane was full
	n      int
	blocks []block // the pool's blocks, whose states record their hashes
	// onMove, when set, hears that the entry of block1 − 1 moved to position pos.
	onMove func(block1 int32, pos uint32)
}

// overEntry is an entry of over: its block and the first slot of its lane, whose count of
// spilled entries the entry is in.
type overEntry struct {
	block int32
	lane  uint32
}

// lineSlot is one slot of a line: tag holds bits 40–63 of the block's hash in its high 24
// bits (in a lane's first slot, its low 8 bits are secondBit and the lane's count of entries
// in over); block1 is the block plus one, 0 when the slot is empty.
type lineSlot struct {
	tag    uint32
	block1 int32
}

const (
	// groupBlocks is how many consecutive blocks share an anchor, and lineSlots how many
	// entries a line holds: two per lane.
	groupBlocks = 8
	lineSlots   = 2 * groupBlocks
	// spillMask is the part of a first slot's tag that counts the lane's entries in over;
	// at spillMask the count sticks, and lookups always search over for the lane.
	spillMask = 0x7f
	// secondBit, in a first slot's tag, says that the lane's second slot is taken.
	secondBit = 0x80
	metaMask  = spillMask | secondBit
)

// tagOf returns the part of hash h that a slot keeps.
func tagOf(h uint64) uint32 { return uint32(h>>32) &^ metaMask }

// blockKey is a block hash and where the table looks for it.
type blockKey struct {
	hash, anchor uint64
	lane         uint32
}

// keyOf returns the key of block j of a sequence whose block hashes are hashes.
func keyOf(hashes []uint64, j int) blockKey {
	return blockKey{hash: hashes[j], anchor: hashes[j&^(groupBlocks-1)], lane: uint32(j & (groupBlocks - 1))}
}

// reserve sizes an empty table for n entries of blocks: lines hold four times as many, so
// that few lines hold more than one group and few entries spill (8 bytes per slot: 32 per
// block).
func (t *prefixTable) reserve(n int, blocks []block) {
	lines := 16
	for lineSlots*lines < 4*n {
		lines *= 2
	}
	t.lines = make([]lineSlot, lineSlots*lines)
	t.blocks = blocks
	t.shift = 64
	for l := lines; l > 1; l >>= 1 {
		t.shift--
	}
	t.over.Reserve(max(n/8, 64))
	t.over.OnMove = func(e *overEntry, i int) {
		if t.onMove != nil {
			t.onMove(e.block+1, uint32(len(t.lines))+uint32(i))
		}
	}
}

// lane returns the first slot of k's lane: its line's first slot plus its lane.
func (t *prefixTable) lane(k blockKey) uint32 {
	l := uint32((k.anchor*0x9E3779B97F4A7C15)>>(t.shift&63)) * lineSlots // shift < 64: no guard
	return l + k.lane&(groupBlocks-1)
}

// holds reports whether slot s holds hash h, whose tag is tag.
func (t *prefixTable) holds(s lineSlot, tag uint32, h uint64) bool {
	return s.block1 != 0 && s.tag&^metaMask == tag && t.blocks[s.block1-1].hash == h
}

// get returns the block cached under k.
func (t *prefixTable) get(k blockKey) (int32, bool) {
	i := t.lane(k)
	ln := (*[groupBlocks + 1]lineSlot)(t.lines[i:])
	tag := tagOf(k.hash)
	s0 := ln[0]
	if t.holds(s0, tag, k.hash) {
		return s0.block1 - 1, true
	}
	if s1 := ln[groupBlocks]; s0.tag&secondBit != 0 && t.holds(s1, tag, k.hash) {
		return s1.block1 - 1, true
	}
	if s0.tag&spillMask == 0 {
		return 0, false
	}
	if e := t.over.Find(k.hash); e != nil {
		return e.block, true
	}
	return 0, false
}

// putInEmpty maps k to block b when k's lane is empty and has never spilled, so that the
// table cannot hold k, and returns the new entry's position; it is false, changing nothing,
// otherwise (getOrPut). The caller records k's hash in b's state. Small enough to inline:
// most insertions find their lane so.
func (t *prefixTable) putInEmpty(k blockKey, b int32) (uint32, bool) {
	i := t.lane(k)
	s0 := &t.lines[i]
	if *s0 != (lineSlot{}) {
		return 0, false
	}
	t.n++
	s0.tag, s0.block1 = tagOf(k.hash), b+1
	return i, true
}

// getOrPut returns the block cached under k when the table holds it; otherwise it maps k to
// block b and returns the new entry's position, reading the line once. The caller records
// k's hash in b's state, as after putInEmpty.
func (t *prefixTable) getOrPut(k blockKey, b int32) (c int32, pos uint32, found bool) {
	i := t.lane(k)
	ln := (*[groupBlocks + 1]lineSlot)(t.lines[i:])
	s0, s1 := &ln[0], &ln[groupBlocks]
	tag := tagOf(k.hash)
	if t.holds(*s0, tag, k.hash) {
		return s0.block1 - 1, 0, true
	}
	if s0.tag&secondBit != 0 && t.holds(*s1, tag, k.hash) {
		return s1.block1 - 1, 0, true
	}
	if s0.tag&spillMask != 0 {
		if e := t.over.Find(k.hash); e != nil {
			return e.block, 0, true
		}
	}
	t.n++
	switch {
	case s0.block1 == 0:
		s0.tag, s0.block1 = tag|s0.tag&metaMask, b+1
		return 0, i, false
	case s0.tag&secondBit == 0:
		s1.tag, s1.block1 = tag, b+1
		s0.tag |= secondBit
		return 0, i + groupBlocks, false
	}
	return 0, t.spill(i, k, b), false
}

// spill puts k, whose lane's slots (the first at i) are both taken, in over; the lane counts
// it. The caller has counted the entry in t.n.
func (t *prefixTable) spill(i uint32, k blockKey, b int32) uint32 {
	if s0 := &t.lines[i]; s0.tag&spillMask != spillMask {
		s0.tag++
	}
	j := t.over.Set(k.hash, overEntry{block: b, lane: i})
	return uint32(len(t.lines)) + uint32(j)
}

// block returns the block of the entry at pos.
func (t *prefixTable) block(pos uint32) int32 {
	if int(pos) < len(t.lines) {
		return t.lines[pos].block1 - 1
	}
	return t.over.At(int(pos - uint32(len(t.lines)))).block
}

// key returns the hash of the entry at pos.
func (t *prefixTable) key(pos uint32) uint64 { return t.blocks[t.block(pos)].hash }

// setBlock makes the entry at pos map to block b, which holds the same hash.
func (t *prefixTable) setBlock(pos uint32, b int32) {
	if int(pos) < len(t.lines) {
		t.lines[pos].block1 = b + 1
		return
	}
	t.over.At(int(pos - uint32(len(t.lines)))).block = b
}

// deleteAt removes the entry at pos.
func (t *prefixTable) deleteAt(pos uint32) {
	if int(pos) < len(t.lines) {
		t.deleteInLine(pos)
		return
	}
	t.n--
	i := int(pos - uint32(len(t.lines)))
	if s0 := &t.lines[t.over.At(i).lane]; s0.tag&spillMask != spillMask {
		s0.tag--
	}
	t.over.DeleteAt(i)
}

// deleteInLine removes the entry at pos, a slot of lines. A first slot keeps its lane's
// secondBit and count; a second slot clears its lane's secondBit.
func (t *prefixTable) deleteInLine(pos uint32) {
	t.n--
	s := &t.lines[pos]
	s.tag, s.block1 = s.tag&metaMask, 0
	if pos&groupBlocks != 0 { // a second slot
		t.lines[pos-groupBlocks].tag &^= secondBit
	}
}

// touch reads anchor's line and returns a value made of it, which the caller keeps so that
// the read is not dropped. Reads of several lines in a row do not depend on each other, so
// the processor overlaps their cache misses, and the work that follows finds the lines
// cached instead of missing one after another.
func (t *prefixTable) touch(anchor uint64) uint64 {
	return uint64(t.lines[t.lane(blockKey{anchor: anchor})].tag)
}

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
		return uint64(t.lines[pos].tag)
	}
	return t.over.KeyAt(int(pos - uint32(len(t.lines))))
}
