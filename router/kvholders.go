package router

import "kvroute/router/prefix"

// kvHolders is a router's view of which endpoint (by interned id) caches which KV block,
// fed by the endpoints' KV events; precise-prefix, kv-router and predicted-ttft read it.
// Each block's holders are kept most recently stored last, at most perKey of them when perKey
// is set (llm-d's index keeps 10 per key); 0 keeps them all, as Dynamo's does. Entries are
// confirmed (tag 0) unless a caller stores speculative ones (precise-prefix).
type kvHolders struct{ x *prefix.Holders }

func newKVHolders(perKey int) kvHolders { return kvHolders{prefix.NewHolders(perKey)} }

// onGPU reports whether a KV event's medium is the GPU tier ("" when the engine named none).
func onGPU(medium string) bool { return medium == MediumGPU || medium == "" }

// stored records that ep caches h, as its most recent holder; beyond perKey holders the
// least recent is forgotten.
func (k kvHolders) stored(ep int32, h uint64) { k.x.Store(h, prefix.Holder{Endpoint: ep}) }

// removed records that ep evicted h.
func (k kvHolders) removed(ep int32, h uint64) { k.x.Remove(h, prefix.Holder{Endpoint: ep}) }

// cleared forgets every block ep caches, confirmed or speculative.
func (k kvHolders) cleared(ep int32) { k.x.RemoveEndpoint(ep) }

// leadingRun sets run[ep] to the number of leading blocks of hashes that ep caches without a
// gap (the prefix an engine can reuse). run must have one entry per interned id.
func (k kvHolders) leadingRun(hashes []uint64, run []int) { k.x.LeadingRun(hashes, run) }
