package prefix_test

import (
	"fmt"
	"time"

	"kvroute/router/prefix"
)

// Example hashes two prompts that share a system prompt and asks an AIBrix
// prefix table which endpoints hold how much of the second one.
func Example() {
	const blockSize = 16 // bytes per block
	seed := prefix.Seed("llama-3-8b", "")
	system := "You are a helpful assistant. Answer briefly. "
	first := prefix.ChainHashString(nil, seed, system+"What is KV caching?", blockSize, 0, false)
	second := prefix.ChainHashString(nil, seed, system+"Why route by prefix?", blockSize, 0, false)

	store, err := prefix.NewBlockStore(prefix.DefaultBlockStoreCapacity)
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store.Add(first, 1, now) // the first prompt was routed to endpoint 1

	matched := make([]int, 3) // blocks matched, by endpoint
	store.Match(second, nil, matched)
	fmt.Println(len(second), "blocks; matched per endpoint:", matched)
	// Output: 4 blocks; matched per endpoint: [0 2 0]
}

func ExampleIndex() {
	idx, err := prefix.NewIndex(prefix.DefaultIndexCapacity)
	if err != nil {
		fmt.Println(err)
		return
	}
	idx.Add([]uint64{10, 11, 12}, 0)
	idx.Add([]uint64{10, 11}, 2)
	counts := make([]int, 3)
	idx.Match([]uint64{10, 11, 12, 13}, counts)
	fmt.Println(counts)
	// Output: [3 0 2]
}

func ExampleTree() {
	tree := prefix.NewTree()
	tree.Insert("system: be brief\nuser: hi", 0, 1)
	tree.Insert("system: be brief\nuser: hello", 1, 2)
	tree.Insert("unrelated", 2, 3)

	matched, tenants := tree.Match("system: be brief\nuser: help", nil, nil)
	fmt.Println(matched, tenants)
	fmt.Println(tree.SmallestTenants(nil, nil))

	// Tenant 1 holds the shared 24 bytes plus "ello"; trimming it to 25
	// bytes drops its least recently used leaf.
	removed := tree.EvictTenant(1, 25)
	fmt.Println(removed, tree.TenantSize(1))
	// Output:
	// 26 [1]
	// [2]
	// 4 24
}
