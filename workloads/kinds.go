package workloads

// KindInfo is one workload kind and what it generates, in a line.
type KindInfo struct {
	Kind Kind
	Doc  string
}

// Kinds lists every workload kind, for listings such as `simulate -list`.
func Kinds() []KindInfo {
	return []KindInfo{
		{KindSharedPrefix, "groups of prompts sharing a system prompt (SGLang generated-shared-prefix, inference-perf shared_prefix)"},
		{KindSyntheticChat, "ShareGPT-like multi-turn conversations, each turn sending the whole history (no dataset needed)"},
		{KindShareGPT, "the ShareGPT JSON dataset (path), single-turn as vllm bench serve samples it, or whole conversations"},
		{KindChatPrefixes, "KubeAI's benchmark: nested-prefix prompts cut from conversations, re-sent in rounds by closed-loop clients"},
		{KindMooncake, "a Mooncake JSONL trace (path): equal hash_ids are equal 512-token blocks, timestamps as arrivals"},
		{KindAzure, "an Azure LLM inference CSV trace (path): context and generated tokens, timestamps as arrivals"},
		{KindMix, "tenants, each with its own workload and rate"},
	}
}
