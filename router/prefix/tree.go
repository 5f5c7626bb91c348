package prefix

import "strings"

// rootNode is the slot of the tree's root, whose label is empty.
const rootNode int32 = 0

// Tree is the multi-tenant character radix tree behind SGLang's cache_aware
// router and Ray Serve's PrefixCacheAffinityRouter. Tenants are endpoints.
//
// Edges carry strings; a node's children are keyed by the first byte of
// their label and nodes split where an insert diverges or ends mid-edge.
// Every node records which tenants hold it and when each last inserted
// through it; a tenant holding a node holds all its ancestors. Sizes are
// counted in bytes of label, which equals characters for ASCII text.
//
// Memory is bounded by what tenants hold: every node other than the root is
// held by at least one tenant and has a non-empty label, and nodes nobody
// holds are deleted (their slots are reused). Edge labels are copied on
// insert, so the tree never retains callers' strings.
//
// A Tree is not safe for concurrent mutation. Match, TenantSize and
// SmallestTenants do not modify it, so they may run concurrently with each
// other when no mutation runs beside them.
type Tree struct {
	nodes []treeNode
	free  []int32 // free slots in nodes
	sizes []int   // bytes held, by tenant

	// Scratch space for EvictTenant, reused between calls.
	stack []int32
	heap  []leafItem
}

// treeNode is one node of the tree, stored in a slab and linked by index.
type treeNode struct {
	label    string
	parent   int32
	children []edge   // sorted by first byte
	holders  []holder // sorted by tenant
}

// edge is a child link keyed by the first byte of the child's label.
type edge struct {
	first byte
	node  int32
}

// holder is a tenant holding a node and the time it last inserted through
// the node, in caller-defined int64 units (nanoseconds by convention).
type holder struct {
	tenant int32
	at     int64
}

// NewTree returns an empty tree.
func NewTree() *Tree {
	return &Tree{nodes: []treeNode{{parent: none}}}
}

// Nodes returns the number of nodes in the tree, not counting the root.
func (tr *Tree) Nodes() int { return len(tr.nodes) - 1 - len(tr.free) }

// Insert records that tenant holds text, stamping every node on its path
// with now. Inserting registers the tenant even when text is empty. A
// negative tenant is ignored.
func (tr *Tree) Insert(text string, tenant int32, now int64) {
	if tenant < 0 {
		return
	}
	for int(tenant) >= len(tr.sizes) {
		tr.sizes = append(tr.sizes, 0)
	}
	cur := rootNode
	tr.touch(cur, tenant, now)
	for len(text) > 0 {
		c := tr.child(cur, text[0])
		if c == none {
			c = tr.newNode(strings.Clone(text), cur)
			tr.touch(c, tenant, now)
			return
		}
		k := commonPrefixLen(tr.nodes[c].label, text)
		if k < len(tr.nodes[c].label) {
			c = tr.split(c, k)
		}
		tr.touch(c, tenant, now)
		text = text[k:]
		cur = c
	}
}

// Match returns the longest prefix of text held by any allowed tenant and
// appends to dst, in ascending order, the allowed tenants that hold all of
// it. matched is in bytes, backed off so that text[:matched] never ends
// inside a UTF-8 sequence. A match that ends inside an edge counts the
// matched part of the edge.
//
// allowed[t] selects tenant t; a nil allowed selects every tenant. When
// nothing matches, matched is 0 and the tenants are the allowed ones that
// have ever inserted (and were not removed). Match does not refresh
// timestamps and allocates only to grow dst.
func (tr *Tree) Match(text string, allowed []bool, dst []int32) (matched int, tenants []int32) {
	// path remembers the last few nodes walked and the offset where each
	// starts, enough to undo a UTF-8 back-off of up to three bytes.
	var path [utfBackoff + 1]struct {
		node  int32
		start int
	}
	steps := 0
	cur, depth := rootNode, 0
	for depth < len(text) {
		c := tr.child(cur, text[depth])
		if c == none || !tr.heldByAllowed(c, allowed) {
			break
		}
		label := tr.nodes[c].label
		k := commonPrefixLen(label, text[depth:])
		path[steps%len(path)].node, path[steps%len(path)].start = c, depth
		steps++
		depth += k
		if k < len(label) {
			break
		}
		cur = c
	}
	matched = runeBoundary(text, depth)
	last := rootNode
	for s := steps - 1; s >= 0 && s >= steps-len(path); s-- {
		if p := path[s%len(path)]; p.start < matched {
			last = p.node
			break
		}
	}
	return matched, tr.appendAllowed(dst, last, allowed)
}

// utfBackoff is the most bytes runeBoundary can back off.
const utfBackoff = 3

// child returns the child of n whose label starts with b, or none.
func (tr *Tree) child(n int32, b byte) int32 {
	cs := tr.nodes[n].children
	lo, hi := 0, len(cs)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if cs[mid].first < b {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(cs) && cs[lo].first == b {
		return cs[lo].node
	}
	return none
}

// findHolder returns where tenant t is, or would be inserted, in hs.
func findHolder(hs []holder, t int32) (int, bool) {
	lo, hi := 0, len(hs)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if hs[mid].tenant < t {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(hs) && hs[lo].tenant == t
}

// holds reports whether tenant t holds node n.
func (tr *Tree) holds(n, t int32) bool {
	_, ok := findHolder(tr.nodes[n].holders, t)
	return ok
}

// heldByAllowed reports whether any allowed tenant holds node n.
func (tr *Tree) heldByAllowed(n int32, allowed []bool) bool {
	hs := tr.nodes[n].holders
	if allowed == nil {
		return len(hs) > 0
	}
	for _, h := range hs {
		if allowedAt(allowed, h.tenant) {
			return true
		}
	}
	return false
}

// appendAllowed appends the allowed holders of n to dst in ascending order.
func (tr *Tree) appendAllowed(dst []int32, n int32, allowed []bool) []int32 {
	for _, h := range tr.nodes[n].holders {
		if allowedAt(allowed, h.tenant) {
			dst = append(dst, h.tenant)
		}
	}
	return dst
}

// touch marks node n as held by tenant t at time now, counting the label
// toward t's size if t did not hold it yet.
func (tr *Tree) touch(n, t int32, now int64) {
	node := &tr.nodes[n]
	i, ok := findHolder(node.holders, t)
	if ok {
		node.holders[i].at = now
		return
	}
	node.holders = append(node.holders, holder{})
	copy(node.holders[i+1:], node.holders[i:])
	node.holders[i] = holder{tenant: t, at: now}
	tr.sizes[t] += len(node.label)
}

// split cuts node c after k bytes of its label (0 < k < len) and returns the
// new node holding the first k bytes, which takes c's place under c's parent
// and is held by the same tenants at the same times. Tenant sizes do not
// change. The new prefix gets its own copy of the bytes, so c's (older)
// backing string is only kept alive by c.
func (tr *Tree) split(c int32, k int) int32 {
	p := tr.alloc()
	old := tr.nodes[c].label
	pn, cn := &tr.nodes[p], &tr.nodes[c]
	pn.label = strings.Clone(old[:k])
	pn.parent = cn.parent
	pn.holders = append(pn.holders[:0], cn.holders...)
	pn.children = append(pn.children[:0], edge{first: old[k], node: c})
	cn.label = old[k:]
	cn.parent = p
	siblings := tr.nodes[pn.parent].children
	for i := range siblings {
		if siblings[i].node == c {
			siblings[i].node = p
			break
		}
	}
	return p
}

// newNode creates a leaf with the given label under parent, held by nobody.
func (tr *Tree) newNode(label string, parent int32) int32 {
	n := tr.alloc()
	node := &tr.nodes[n]
	node.label, node.parent = label, parent
	siblings := tr.nodes[parent].children
	i := len(siblings)
	for i > 0 && siblings[i-1].first > label[0] {
		i--
	}
	siblings = append(siblings, edge{})
	copy(siblings[i+1:], siblings[i:])
	siblings[i] = edge{first: label[0], node: n}
	tr.nodes[parent].children = siblings
	return n
}

// alloc returns an empty node slot, reusing freed ones (and their arrays).
func (tr *Tree) alloc() int32 {
	if k := len(tr.free); k > 0 {
		n := tr.free[k-1]
		tr.free = tr.free[:k-1]
		return n
	}
	tr.nodes = append(tr.nodes, treeNode{parent: none})
	return int32(len(tr.nodes) - 1)
}
