package engine

// HeldBlocks returns the ids of the blocks prefill leg req holds for its decoder, in prompt
// order, or nil when it holds none: what vLLM returns as remote_block_ids. The slice is the
// caller's.
func (r *Replica) HeldBlocks(req *Request) []int32 {
	h := r.held[req]
	if h == nil {
		return nil
	}
	return append([]int32(nil), h.blocks...)
}

// Holds reports whether prefill leg req still holds its blocks for a decoder.
func (r *Replica) Holds(req *Request) bool { return r.held[req] != nil }
