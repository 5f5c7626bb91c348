package prefix

// TenantSize returns how many bytes of label tenant t holds (characters for
// ASCII text); 0 for a tenant that never inserted.
func (tr *Tree) TenantSize(t int32) int {
	if t < 0 || int(t) >= len(tr.sizes) {
		return 0
	}
	return tr.sizes[t]
}

// SmallestTenants appends to dst, in ascending order, every allowed tenant
// tied for the smallest TenantSize: SGLang's and Ray's "most cache space"
// choice. allowed[t] selects tenant t, including tenants that never inserted
// (size 0); a nil allowed selects the tenants that have inserted and were not
// removed.
func (tr *Tree) SmallestTenants(allowed []bool, dst []int32) []int32 {
	if allowed == nil {
		best := -1
		for _, h := range tr.nodes[rootNode].holders {
			if s := tr.sizes[h.tenant]; best < 0 || s < best {
				best = s
			}
		}
		for _, h := range tr.nodes[rootNode].holders {
			if tr.sizes[h.tenant] == best {
				dst = append(dst, h.tenant)
			}
		}
		return dst
	}
	best := -1
	for t, ok := range allowed {
		if s := tr.TenantSize(int32(t)); ok && (best < 0 || s < best) {
			best = s
		}
	}
	for t, ok := range allowed {
		if ok && tr.TenantSize(int32(t)) == best {
			dst = append(dst, int32(t))
		}
	}
	return dst
}

// EvictTenant removes tenant t's least recently inserted leaves (nodes t
// holds with no child t holds), one at a time and oldest first, until t
// holds at most target bytes, as SGLang's eviction loop does. A
// node no tenant holds any more is deleted. It returns the number of bytes
// removed from t. A negative target counts as zero; the tenant stays
// registered (see RemoveTenant).
func (tr *Tree) EvictTenant(t int32, target int) int { return tr.evictTenant(t, target, false) }

// EvictTenantGroups is EvictTenant as Ray's evict_tenant_by_lru does it
// (ray-project/ray python/ray/llm/_internal/serve/routing_policies/prefix_aware/
// prefix_tree.py): once t is at or below target it goes on removing the
// leaves inserted at the same time as the last one removed, so that one
// insertion's nodes leave together.
func (tr *Tree) EvictTenantGroups(t int32, target int) int { return tr.evictTenant(t, target, true) }

func (tr *Tree) evictTenant(t int32, target int, groups bool) int {
	target = max(target, 0)
	if tr.TenantSize(t) <= target {
		return 0
	}
	tr.collectLeaves(t)
	removed, last := 0, int64(0)
	for len(tr.heap) > 0 && (tr.sizes[t] > target || groups && tr.heap[0].at == last) {
		leaf := tr.popLeaf()
		last = leaf.at
		parent := tr.nodes[leaf.node].parent
		removed += tr.release(leaf.node, t)
		if parent != rootNode && tr.isLeafOf(parent, t) {
			i, _ := findHolder(tr.nodes[parent].holders, t)
			tr.pushLeaf(leafItem{at: tr.nodes[parent].holders[i].at, node: parent})
		}
	}
	tr.heap = tr.heap[:0]
	return removed
}

// RemoveTenant forgets tenant t entirely: it holds nothing afterwards and is
// no longer registered.
func (tr *Tree) RemoveTenant(t int32) {
	if t < 0 || int(t) >= len(tr.sizes) {
		return
	}
	tr.EvictTenant(t, 0)
	root := &tr.nodes[rootNode]
	if i, ok := findHolder(root.holders, t); ok {
		root.holders = append(root.holders[:i], root.holders[i+1:]...)
	}
}

// collectLeaves fills tr.heap with t's leaves, heap-ordered.
func (tr *Tree) collectLeaves(t int32) {
	tr.heap = tr.heap[:0]
	tr.stack = append(tr.stack[:0], rootNode)
	for len(tr.stack) > 0 {
		n := tr.stack[len(tr.stack)-1]
		tr.stack = tr.stack[:len(tr.stack)-1]
		leaf := true
		for _, c := range tr.nodes[n].children {
			if tr.holds(c.node, t) {
				tr.stack = append(tr.stack, c.node)
				leaf = false
			}
		}
		if leaf && n != rootNode {
			i, _ := findHolder(tr.nodes[n].holders, t)
			tr.heap = append(tr.heap, leafItem{at: tr.nodes[n].holders[i].at, node: n})
		}
	}
	for i := len(tr.heap)/2 - 1; i >= 0; i-- {
		tr.siftDown(i)
	}
}

// isLeafOf reports whether t holds n but none of its children.
func (tr *Tree) isLeafOf(n, t int32) bool {
	if !tr.holds(n, t) {
		return false
	}
	for _, c := range tr.nodes[n].children {
		if tr.holds(c.node, t) {
			return false
		}
	}
	return true
}

// release drops t from node n, deleting n if nobody holds it any more, and
// returns the bytes t no longer holds.
func (tr *Tree) release(n, t int32) int {
	node := &tr.nodes[n]
	i, ok := findHolder(node.holders, t)
	if !ok {
		return 0
	}
	node.holders = append(node.holders[:i], node.holders[i+1:]...)
	size := len(node.label)
	tr.sizes[t] -= size
	if len(node.holders) == 0 {
		tr.deleteNode(n)
	}
	return size
}

// deleteNode unlinks the unheld leaf n from its parent and frees its slot.
func (tr *Tree) deleteNode(n int32) {
	node := &tr.nodes[n]
	if len(node.children) != 0 {
		// A child is held only by holders of its parent, and unheld nodes
		// are deleted at once, so an unheld node has no children.
		panic("prefix: tree invariant broken: deleting a node that has children")
	}
	p := &tr.nodes[node.parent]
	for i, c := range p.children {
		if c.node == n {
			p.children = append(p.children[:i], p.children[i+1:]...)
			break
		}
	}
	node.label, node.parent = "", none
	tr.free = append(tr.free, n)
}

// leafItem is a heap entry: a leaf and its tenant's last-insert time.
type leafItem struct {
	at   int64
	node int32
}

// before orders leaves oldest first, then by slot for determinism.
func (a leafItem) before(b leafItem) bool {
	return a.at < b.at || (a.at == b.at && a.node < b.node)
}

// pushLeaf adds it to the heap.
func (tr *Tree) pushLeaf(it leafItem) {
	tr.heap = append(tr.heap, it)
	for i := len(tr.heap) - 1; i > 0; {
		p := (i - 1) / 2
		if !tr.heap[i].before(tr.heap[p]) {
			break
		}
		tr.heap[i], tr.heap[p] = tr.heap[p], tr.heap[i]
		i = p
	}
}

// popLeaf removes and returns the oldest leaf.
func (tr *Tree) popLeaf() leafItem {
	top := tr.heap[0]
	last := len(tr.heap) - 1
	tr.heap[0] = tr.heap[last]
	tr.heap = tr.heap[:last]
	tr.siftDown(0)
	return top
}

// siftDown restores the heap order below i.
func (tr *Tree) siftDown(i int) {
	h := tr.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
