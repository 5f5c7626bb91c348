package prefix

import "math/bits"

// leadingRun is the walk BlockStore.Match and Holders.LeadingRun share: the surviving set
// starts as the candidates (candidate[ep]; nil selects all) below len(out), block i keeps
// only the survivors in setOf(hashes[i]) (each that drops out gets out[ep] = i), and the
// walk stops when no endpoint survives or a block is unknown (setOf returns nil). out is
// cleared first. It costs one bitset word per 64 endpoints per block walked, and a
// survivor-by-survivor walk beyond maxStackWords words.
func leadingRun(hashes []uint64, candidate []bool, out []int, setOf func(uint64) *epSet) {
	clear(out)
	words := wordsFor(len(out))
	if words > maxStackWords {
		leadingRunEach(hashes, candidate, out, setOf)
		return
	}
	var alive [maxStackWords]uint64 // survivors, as a bitset
	var live uint32                 // bit w: alive[w] has a survivor
	for ep := range out {
		if allowedAt(candidate, int32(ep)) {
			alive[ep>>6] |= 1 << (ep & 63)
			live |= 1 << (ep >> 6)
		}
	}
	matched := 0
	for i, h := range hashes {
		set := setOf(h)
		if set == nil {
			break
		}
		for m := live; m != 0; m &= m - 1 { // only the words with survivors
			w := bits.TrailingZeros32(m)
			keep := alive[w] & set.word(w)
			setEach(out, w, alive[w]&^keep, i) // dropped out after i blocks
			alive[w] = keep
			if keep == 0 {
				live &^= 1 << w
			}
		}
		if live == 0 {
			return
		}
		matched = i + 1
	}
	for m := live; m != 0; m &= m - 1 {
		w := bits.TrailingZeros32(m)
		setEach(out, w, alive[w], matched)
	}
}

// leadingRunEach is leadingRun for fleets too large for a bitset on the stack: it tracks
// survivors in out itself (out[ep] == i means ep held blocks 0..i-1).
func leadingRunEach(hashes []uint64, candidate []bool, out []int, setOf func(uint64) *epSet) {
	for i, h := range hashes {
		set := setOf(h)
		if set == nil {
			return
		}
		survived := false
		for w := range min(set.words(), wordsFor(len(out))) {
			for m := set.word(w) & lowMask(w, len(out)); m != 0; m &= m - 1 {
				ep := w*64 + bits.TrailingZeros64(m)
				if out[ep] == i && allowedAt(candidate, int32(ep)) {
					out[ep] = i + 1
					survived = true
				}
			}
		}
		if !survived {
			return
		}
	}
}
