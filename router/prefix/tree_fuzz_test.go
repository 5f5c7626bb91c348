package prefix

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// treeAlphabet mixes ASCII with multi-byte runes that share leading bytes
// (so node boundaries fall inside runes) and invalid UTF-8.
var treeAlphabet = []string{
	"a", "b", "c", "ab", "abc", " ",
	"\u00e9", "\u00e8", "\u00ea", // C3 A9, C3 A8, C3 AA
	"\U0001F600", "\U0001F601", "\U0001F642", // F0 9F 98 80, F0 9F 98 81, F0 9F 99 82
	"\xc3", "\x80", "\xff",
}

func (s *script) text() string {
	var b strings.Builder
	for range s.next(10) {
		b.WriteString(treeAlphabet[s.next(len(treeAlphabet))])
	}
	return b.String()
}

// naiveTree remembers every string each tenant inserted.
type naiveTree struct {
	texts      map[int32][]string
	registered map[int32]bool
}

// match is the definition Tree.Match implements: the longest common prefix
// with any allowed tenant's string, backed off to a rune boundary found by
// decoding from the start, and the allowed tenants that reach it.
func (m *naiveTree) match(text string, allowed []bool) (int, []int32) {
	best := map[int32]int{}
	longest := 0
	for t := range m.registered {
		if !allowedAt(allowed, t) {
			continue
		}
		for _, s := range m.texts[t] {
			n := 0
			for n < len(s) && n < len(text) && s[n] == text[n] {
				n++
			}
			best[t] = max(best[t], n)
		}
		best[t] = max(best[t], 0)
		longest = max(longest, best[t])
	}
	matched := 0
	for i := 0; i < len(text); {
		_, size := utf8.DecodeRuneInString(text[i:])
		if i+size > longest {
			break
		}
		i += size
		matched = i
	}
	if longest == len(text) {
		matched = longest
	}
	var tenants []int32
	for t, n := range best {
		if n >= matched {
			tenants = append(tenants, t)
		}
	}
	slices.Sort(tenants)
	return matched, tenants
}

// FuzzTreeMatch inserts and matches random strings and compares Tree.Match
// with the naive oracle. Evicted or removed tenants leave the oracle (their
// exact holdings are no longer known) but must not disturb the others.
func FuzzTreeMatch(f *testing.F) {
	f.Add([]byte{0, 0, 3, 0, 1, 2, 1, 1, 3, 0, 1, 3, 8, 2, 3, 0, 1, 4, 31})
	f.Add([]byte{0, 0, 2, 6, 7, 0, 1, 2, 6, 8, 8, 0, 2, 6, 9, 31})
	f.Add([]byte{0, 2, 3, 9, 10, 0, 0, 1, 3, 9, 11, 0, 8, 1, 3, 9, 12, 31})
	f.Add([]byte("\x00\x00\x05abcde\x00\x01\x04abcd\x02\x00\x03\x08\x05abcde\x1f\x03\x01"))
	f.Fuzz(runTreeScript)
}

// runTreeScript is the body of FuzzTreeMatch.
func runTreeScript(t *testing.T, in []byte) {
	sc := &script{b: in}
	tr := NewTree()
	m := &naiveTree{texts: map[int32][]string{}, registered: map[int32]bool{}}
	opaque := map[int32]bool{} // tenants whose holdings the oracle no longer knows
	now := int64(0)
	for step := 0; sc.more(); step++ {
		now++
		switch op, tenant := sc.next(4), int32(sc.next(5)); op {
		case 0, 1:
			text := sc.text()
			tr.Insert(text, tenant, now)
			m.texts[tenant] = append(m.texts[tenant], text)
			m.registered[tenant] = true
		case 2:
			target := sc.next(12)
			before := tr.TenantSize(tenant)
			removed := tr.EvictTenant(tenant, target)
			if after := tr.TenantSize(tenant); after != before-removed || (before > target && after > target) {
				t.Fatalf("step %d: EvictTenant(%d, %d): size %d -> %d, removed %d", step, tenant, target, before, after, removed)
			}
			opaque[tenant] = true
		case 3:
			if sc.next(4) == 0 {
				tr.RemoveTenant(tenant)
				delete(m.registered, tenant)
				delete(m.texts, tenant)
				delete(opaque, tenant)
				break
			}
			text, mask := sc.text(), sc.mask()
			if mask == nil {
				mask = []bool{true, true, true, true, true}
			}
			for t := range opaque {
				if int(t) < len(mask) {
					mask[t] = false
				}
			}
			gotM, gotT := tr.Match(text, mask, nil)
			wantM, wantT := m.match(text, mask)
			if gotM != wantM || !cmp.Equal(wantT, gotT, cmpopts.EquateEmpty()) {
				t.Fatalf("step %d: Match(%q, %v) = %d %v, want %d %v", step, text, mask, gotM, gotT, wantM, wantT)
			}
		}
		checkTreeInvariants(t, tr)
	}
}
