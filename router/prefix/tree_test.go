package prefix

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// insertion is one Tree.Insert call.
type insertion struct {
	text   string
	tenant int32
	at     int64
}

func buildTree(t *testing.T, ins []insertion) *Tree {
	t.Helper()
	tr := NewTree()
	for _, in := range ins {
		tr.Insert(in.text, in.tenant, in.at)
	}
	checkTreeInvariants(t, tr)
	return tr
}

func TestTreeMatch(t *testing.T) {
	abc := []insertion{{text: "hello world", tenant: 0}, {text: "hello there", tenant: 1}, {text: "help", tenant: 2}}
	tests := []struct {
		name        string
		ins         []insertion
		text        string
		allowed     []bool
		wantMatched int
		wantTenants []int32
	}{
		{name: "empty tree", text: "hello", wantMatched: 0},
		{name: "exact", ins: abc, text: "hello world", wantMatched: 11, wantTenants: []int32{0}},
		{name: "longer query", ins: abc, text: "hello world and more", wantMatched: 11, wantTenants: []int32{0}},
		{name: "shared part only", ins: abc, text: "hello moon", wantMatched: 6, wantTenants: []int32{0, 1}},
		{name: "inside an edge", ins: abc, text: "hello wo", wantMatched: 8, wantTenants: []int32{0}},
		{name: "diverges inside an edge", ins: abc, text: "hello worms", wantMatched: 9, wantTenants: []int32{0}},
		{name: "three share a prefix", ins: abc, text: "hex", wantMatched: 2, wantTenants: []int32{0, 1, 2}},
		{name: "no match lists every registered tenant", ins: abc, text: "xyz", wantMatched: 0, wantTenants: []int32{0, 1, 2}},
		{name: "empty query", ins: abc, text: "", wantMatched: 0, wantTenants: []int32{0, 1, 2}},
		{
			name: "disallowed tenants do not extend the match", ins: abc, text: "hello world",
			allowed: []bool{false, true, true}, wantMatched: 6, wantTenants: []int32{1},
		},
		{
			name: "short allowed mask excludes later tenants", ins: abc, text: "help",
			allowed: []bool{true, true}, wantMatched: 3, wantTenants: []int32{0, 1},
		},
		{
			name: "nothing allowed", ins: abc, text: "hello",
			allowed: []bool{false, false, false}, wantMatched: 0,
		},
		{
			name: "tenant registered by an empty insert", ins: []insertion{{text: "", tenant: 3}},
			text: "abc", wantMatched: 0, wantTenants: []int32{3},
		},
		{
			name: "match backs off to a rune boundary", ins: []insertion{{text: "caf\u00e9", tenant: 0}},
			text: "caf\u00e8", wantMatched: 3, wantTenants: []int32{0},
		},
		{
			name: "back-off crosses a node boundary",
			ins:  []insertion{{text: "x\u00e9", tenant: 0}, {text: "x\u00e8", tenant: 1}, {text: "y", tenant: 2}},
			text: "x\u00ea", wantMatched: 1, wantTenants: []int32{0, 1},
		},
		{
			name: "back-off to zero returns every tenant",
			ins:  []insertion{{text: "\u00e9", tenant: 0}, {text: "\u00e8", tenant: 1}, {text: "y", tenant: 2}},
			text: "\u00ea", wantMatched: 0, wantTenants: []int32{0, 1, 2},
		},
		{
			name: "four-byte runes",
			ins:  []insertion{{text: "ab\U0001F600", tenant: 0}, {text: "ab\U0001F601", tenant: 1}},
			text: "ab\U0001F602", wantMatched: 2, wantTenants: []int32{0, 1},
		},
		{
			name: "query cut inside a rune keeps the full match",
			ins:  []insertion{{text: "ab\u00e9", tenant: 0}},
			text: "ab\xc3", wantMatched: 3, wantTenants: []int32{0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := buildTree(t, tc.ins)
			dst := []int32{99}
			matched, tenants := tr.Match(tc.text, tc.allowed, dst[:1])
			if matched != tc.wantMatched {
				t.Errorf("matched = %d, want %d", matched, tc.wantMatched)
			}
			if diff := cmp.Diff(append([]int32{99}, tc.wantTenants...), tenants); diff != "" {
				t.Errorf("tenants (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTreeSizes(t *testing.T) {
	tr := buildTree(t, []insertion{
		{text: "hello world", tenant: 0},
		{text: "hello there", tenant: 1},
		{text: "hello", tenant: 1},
		{text: "hello world", tenant: 0}, // repeat adds nothing
		{text: "caf\u00e9", tenant: 2},   // 5 bytes, 4 characters
	})
	want := []int{11, 11, 5, 0}
	for i, w := range want {
		if got := tr.TenantSize(int32(i)); got != w {
			t.Errorf("TenantSize(%d) = %d, want %d", i, got, w)
		}
	}
	if got := tr.TenantSize(-1); got != 0 {
		t.Errorf("TenantSize(-1) = %d, want 0", got)
	}
}

func TestTreeSmallestTenants(t *testing.T) {
	ins := []insertion{{text: "aaaa", tenant: 0}, {text: "bb", tenant: 1}, {text: "cc", tenant: 3}, {text: "dddddd", tenant: 4}}
	tests := []struct {
		name    string
		allowed []bool
		want    []int32
	}{
		{name: "nil selects registered tenants", want: []int32{1, 3}},
		{name: "unregistered allowed tenant has size zero", allowed: []bool{true, true, true}, want: []int32{2}},
		{name: "subset", allowed: []bool{true, false, false, false, true}, want: []int32{0}},
		{name: "nothing allowed", allowed: []bool{false}, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := buildTree(t, ins)
			got := tr.SmallestTenants(tc.allowed, nil)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("SmallestTenants (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTreeEvictTenant(t *testing.T) {
	ins := []insertion{
		{text: "abcX", tenant: 0, at: 1},
		{text: "abcY", tenant: 0, at: 2},
		{text: "zzz", tenant: 0, at: 3},
		{text: "abcY", tenant: 1, at: 4},
	}
	tests := []struct {
		name        string
		target      int
		wantRemoved int
		wantSize    int
		held        []string // texts tenant 0 still fully matches
		gone        []string // texts tenant 0 no longer fully matches
	}{
		{name: "already small enough", target: 100, wantRemoved: 0, wantSize: 8, held: []string{"abcX", "abcY", "zzz"}},
		{name: "oldest leaf first", target: 7, wantRemoved: 1, wantSize: 7, held: []string{"abcY", "zzz"}, gone: []string{"abcX"}},
		{name: "parent becomes a leaf", target: 3, wantRemoved: 5, wantSize: 3, held: []string{"zzz"}, gone: []string{"abc", "abcY"}},
		{name: "everything", target: 0, wantRemoved: 8, wantSize: 0, gone: []string{"a", "z"}},
		{name: "negative target counts as zero", target: -10, wantRemoved: 8, wantSize: 0, gone: []string{"a", "z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := buildTree(t, ins)
			if got := tr.EvictTenant(0, tc.target); got != tc.wantRemoved {
				t.Errorf("EvictTenant removed %d, want %d", got, tc.wantRemoved)
			}
			checkTreeInvariants(t, tr)
			if got := tr.TenantSize(0); got != tc.wantSize {
				t.Errorf("TenantSize = %d, want %d", got, tc.wantSize)
			}
			only0 := []bool{true}
			for _, s := range tc.held {
				if m, _ := tr.Match(s, only0, nil); m != len(s) {
					t.Errorf("tenant 0 matches %d of %q, want all", m, s)
				}
			}
			for _, s := range tc.gone {
				if m, _ := tr.Match(s, only0, nil); m == len(s) {
					t.Errorf("tenant 0 still matches %q", s)
				}
			}
			// Tenant 1 is untouched.
			if m, got := tr.Match("abcY", []bool{false, true}, nil); m != 4 || !cmp.Equal(got, []int32{1}) {
				t.Errorf("tenant 1 match = %d %v, want 4 [1]", m, got)
			}
		})
	}
}

func TestTreeRemoveTenant(t *testing.T) {
	tr := buildTree(t, []insertion{{text: "shared prefix A", tenant: 0}, {text: "shared prefix B", tenant: 1}, {text: "solo", tenant: 0}})
	tr.RemoveTenant(0)
	checkTreeInvariants(t, tr)
	if got := tr.TenantSize(0); got != 0 {
		t.Errorf("TenantSize(0) = %d after removal", got)
	}
	if got := tr.SmallestTenants(nil, nil); !cmp.Equal(got, []int32{1}) {
		t.Errorf("registered tenants = %v, want [1]", got)
	}
	if m, got := tr.Match("solo", nil, nil); m != 1 || !cmp.Equal(got, []int32{1}) {
		t.Errorf("Match(solo) = %d %v, want 1 [1]", m, got)
	}
	// Tenant 1 keeps "s" + "hared prefix " + "B": nodes are not re-merged.
	if got := tr.Nodes(); got != 3 {
		t.Errorf("Nodes = %d, want 3", got)
	}
	tr.RemoveTenant(1)
	tr.RemoveTenant(7) // unknown: no-op
	if got := tr.Nodes(); got != 0 {
		t.Errorf("Nodes = %d after removing every tenant", got)
	}
}

func TestTreeNegativeTenantIgnored(t *testing.T) {
	tr := NewTree()
	tr.Insert("abc", -1, 0)
	tr.RemoveTenant(-1)
	if tr.Nodes() != 0 || tr.EvictTenant(-1, 0) != 0 {
		t.Error("a negative tenant changed the tree")
	}
}

func TestTreeEvictionBounded(t *testing.T) {
	tr := NewTree()
	const target = 2000
	for i := range 500 {
		tenant := int32(i % 4)
		text := fmt.Sprintf("system prompt %d|%s|user %d asks %s", i%3, strings.Repeat("ctx", i%7), i, strings.Repeat("q", i%50))
		tr.Insert(text, tenant, int64(i))
		if tr.TenantSize(tenant) > 2*target {
			if tr.EvictTenant(tenant, target); tr.TenantSize(tenant) > target {
				t.Fatalf("tenant %d holds %d after eviction to %d", tenant, tr.TenantSize(tenant), target)
			}
		}
	}
	checkTreeInvariants(t, tr)
	total := 0
	for tenant := range int32(4) {
		total += tr.TenantSize(tenant)
	}
	if tr.Nodes() > total {
		t.Errorf("%d nodes for %d held bytes", tr.Nodes(), total)
	}
	for tenant := range int32(4) {
		tr.RemoveTenant(tenant)
	}
	if tr.Nodes() != 0 {
		t.Errorf("Nodes = %d after removing every tenant", tr.Nodes())
	}
}

// checkTreeInvariants walks the tree and verifies its structural invariants.
func checkTreeInvariants(t *testing.T, tr *Tree) {
	t.Helper()
	if r := tr.nodes[rootNode]; r.label != "" || r.parent != none {
		t.Fatalf("bad root %+v", r)
	}
	sizes := make([]int, len(tr.sizes))
	reached := 0
	stack := []int32{rootNode}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		node := tr.nodes[n]
		checkHolders(t, tr, n)
		for _, h := range node.holders {
			sizes[h.tenant] += len(node.label)
		}
		for i, c := range node.children {
			child := tr.nodes[c.node]
			if i > 0 && node.children[i-1].first >= c.first {
				t.Fatalf("node %d: children not strictly sorted", n)
			}
			if child.label == "" || child.label[0] != c.first || child.parent != n {
				t.Fatalf("node %d: bad child %d %+v", n, c.node, child)
			}
			stack = append(stack, c.node)
		}
		reached++
	}
	if reached-1 != tr.Nodes() {
		t.Fatalf("reached %d nodes, Nodes() = %d", reached-1, tr.Nodes())
	}
	if diff := cmp.Diff(sizes, tr.sizes, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("tenant sizes (-recomputed +kept):\n%s", diff)
	}
}

// checkHolders verifies n's holders are sorted, non-empty below the root,
// and a subset of its parent's.
func checkHolders(t *testing.T, tr *Tree, n int32) {
	t.Helper()
	node := tr.nodes[n]
	if n != rootNode && len(node.holders) == 0 {
		t.Fatalf("node %d (%q) is held by nobody", n, node.label)
	}
	for i, h := range node.holders {
		if i > 0 && node.holders[i-1].tenant >= h.tenant {
			t.Fatalf("node %d: holders not strictly sorted", n)
		}
		if n != rootNode && !tr.holds(node.parent, h.tenant) {
			t.Fatalf("node %d held by %d but its parent is not", n, h.tenant)
		}
	}
}

// Ray evicts whole groups of nodes inserted at the same time; SGLang stops at the target.
func TestEvictTenantGroups(t *testing.T) {
	for _, tc := range []struct {
		groups      bool
		wantRemoved int
	}{{false, 4}, {true, 8}} {
		tr := NewTree()
		tr.Insert("xxxx", 0, 1)
		tr.Insert("yyyy", 0, 1)
		tr.Insert("zzzz", 0, 2)
		evict := tr.EvictTenant
		if tc.groups {
			evict = tr.EvictTenantGroups
		}
		if got := evict(0, 8); got != tc.wantRemoved || tr.TenantSize(0) != 12-tc.wantRemoved {
			t.Errorf("groups %v: removed %d, size %d; want removed %d", tc.groups, got, tr.TenantSize(0), tc.wantRemoved)
		}
		if m, _ := tr.Match("zzzz", nil, nil); m != 4 {
			t.Errorf("groups %v: the newest insert was evicted (match %d)", tc.groups, m)
		}
	}
}
