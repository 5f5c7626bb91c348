// Package prefix holds the data structures that prefix-cache-aware routing
// policies use to guess which endpoint already has a prompt's KV cache:
//
//   - ChainHash and ChainHashString cut a prompt (bytes, characters or
//     tokenizer output) into fixed-size blocks and chain-hash them with
//     xxhash64, as GIE and AIBrix chain their block hashes; Seed folds the
//     model and adapter into the first hash. TokenBlockHash is the key of a
//     block of token ids (package blockhash), shared with the engine.
//   - BlockStore is AIBrix's global LRU prefix table (capacity in blocks,
//     TTL sweep, AIBrix MatchPrefix semantics).
//   - Index is GIE's approximate per-endpoint LRU index
//     (matchLongestPrefix semantics).
//   - Tree is the multi-tenant character radix tree of SGLang's cache_aware
//     router and Ray Serve's PrefixCacheAffinityRouter.
//   - Holders is a KV-event index (which endpoints' engines report caching
//     each block; llm-d's per-key LRU when bounded), and ActiveBlocks counts
//     the distinct blocks each endpoint's active requests hold (Dynamo's KV
//     router).
//
// Endpoints (tenants, for the Tree) are dense small integers 0..n-1 assigned
// by the caller, so callers can pass masks and receive results in slices
// indexed by endpoint. Time always arrives as an argument; nothing here reads
// the clock, draws random numbers or starts goroutines.
//
// These are hot paths: operations on an 8k-token prompt take microseconds,
// results go into caller-provided slices (append-style dst or out
// arguments), and steady-state operations do not allocate. None of the types
// is safe for concurrent mutation; their read-only methods may run
// concurrently with each other, so a sync.RWMutex around each is enough,
// except Holders.LeadingRun and ActiveBlocks.Shared, which update their
// successor guesses and so need the exclusive lock.
package prefix
