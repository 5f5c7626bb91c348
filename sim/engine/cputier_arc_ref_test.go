package engine

import "slices"

// refARC is the reference's ARC tier: the same rules as arcTier, written as plainly as
// possible (slices searched end to end, eviction by a fresh scan), to check arcTier and the
// engine against.
type refARC struct {
	capacity       int
	target         float64
	t1, t2, b1, b2 []uint64 // oldest first
	ref            map[uint64]int32
	protected      map[uint64]bool
}

func newRefARC(capacity int) *refARC {
	return &refARC{capacity: capacity, ref: map[uint64]int32{}}
}

func (t *refARC) len() int  { return len(t.t1) + len(t.t2) }
func (t *refARC) size() int { return t.capacity }

func (t *refARC) held(h uint64) bool { return slices.Contains(t.t1, h) || slices.Contains(t.t2, h) }

func (t *refARC) lookup(hashes []uint64) int {
	for i, h := range hashes {
		if !t.held(h) || t.ref[h] < 0 {
			return i
		}
	}
	return len(hashes)
}

func (t *refARC) loading(hashes []uint64) bool {
	for _, h := range hashes {
		if t.held(h) && t.ref[h] > 0 {
			return true
		}
	}
	return false
}

func remove(l []uint64, h uint64) []uint64 {
	i := slices.Index(l, h)
	return slices.Delete(l, i, i+1)
}

func (t *refARC) touch(hashes []uint64) {
	for i := len(hashes) - 1; i >= 0; i-- {
		h := hashes[i]
		b1, b2 := float64(len(t.b1)), float64(len(t.b2))
		switch {
		case slices.Contains(t.t1, h) && t.ref[h] < 0:
			t.t1 = append(remove(t.t1, h), h)
		case slices.Contains(t.t1, h):
			t.t1 = remove(t.t1, h)
			t.t2 = append(t.t2, h)
		case slices.Contains(t.t2, h):
			t.t2 = append(remove(t.t2, h), h)
		case slices.Contains(t.b1, h):
			t.target = min(t.target+max(1, b2/b1), float64(t.capacity))
			t.b1 = append(remove(t.b1, h), h)
		case slices.Contains(t.b2, h):
			t.target = max(t.target-max(1, b1/b2), 0)
			t.b2 = append(remove(t.b2, h), h)
		}
	}
}

func (t *refARC) pin(hashes []uint64)   { t.addRef(hashes, 1) }
func (t *refARC) unpin(hashes []uint64) { t.addRef(hashes, -1) }

func (t *refARC) addRef(hashes []uint64, d int32) {
	for _, h := range hashes {
		if t.held(h) {
			t.ref[h] += d
		}
	}
}

func (t *refARC) evictable(h uint64) bool { return t.ref[h] == 0 && !t.protected[h] }

func (t *refARC) prepareStore(hashes []uint64, _, _ []uint64) ([]uint64, []uint64, bool) {
	var toStore []uint64
	t.protected = map[uint64]bool{}
	for _, h := range hashes {
		if t.held(h) {
			t.protected[h] = true
		} else {
			toStore = append(toStore, h)
		}
	}
	if len(toStore) == 0 {
		return nil, nil, true
	}
	// Pick the victims on copies, so that a store that cannot be made changes nothing.
	t1, t2 := slices.Clone(t.t1), slices.Clone(t.t2)
	var evicted []uint64
	var fromT1 []bool
	size1, passed1, passed2 := len(t1), 0, 0 // T1's remaining size; how far each scan went
	for n := len(toStore) - (t.capacity - t.len()); len(evicted) < n; {
		found := false
		if size1 >= int(t.target) {
			for ; passed1 < len(t1) && !found; passed1++ {
				if h := t1[passed1]; t.evictable(h) {
					evicted, fromT1, found = append(evicted, h), append(fromT1, true), true
					size1--
				}
			}
		}
		for ; passed2 < len(t2) && !found; passed2++ {
			if h := t2[passed2]; t.evictable(h) {
				evicted, fromT1, found = append(evicted, h), append(fromT1, false), true
			}
		}
		if !found {
			return nil, nil, false
		}
	}
	for i, h := range evicted {
		delete(t.ref, h)
		if fromT1[i] {
			t.t1, t.b1 = remove(t.t1, h), append(t.b1, h)
		} else {
			t.t2, t.b2 = remove(t.t2, h), append(t.b2, h)
		}
	}
	t.b1 = t.b1[max(0, len(t.b1)-t.capacity):]
	t.b2 = t.b2[max(0, len(t.b2)-t.capacity):]
	for _, h := range toStore {
		t.t1 = append(t.t1, h)
		t.ref[h] = -1
		if i := slices.Index(t.b1, h); i >= 0 {
			t.b1 = slices.Delete(t.b1, i, i+1)
		}
		if i := slices.Index(t.b2, h); i >= 0 {
			t.b2 = slices.Delete(t.b2, i, i+1)
		}
	}
	return toStore, evicted, true
}

func (t *refARC) completeStore(hashes, _ []uint64) []uint64 {
	var stored []uint64
	for _, h := range hashes {
		if t.held(h) && t.ref[h] < 0 {
			t.ref[h] = 0
			stored = append(stored, h)
		}
	}
	return stored
}

func (t *refARC) clear() {
	*t = refARC{capacity: t.capacity, ref: map[uint64]int32{}}
}
