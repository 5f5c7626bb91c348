// Package workloads turns a workload description into a deterministic stream of inference
// requests that drives both the simulator (virtual time) and the live load generator (wall
// time): the same config and seed give the same requests, IDs, arrival times, text and
// token ids, byte for byte.
//
// # Sources
//
// Each source is selected by WorkloadConfig.Kind:
//
//   - shared-prefix: Groups × PromptsPerGroup prompts made of a per-group system prompt and a
//     question. Preset sglang (default) is SGLang's generated-shared-prefix: 64 × 16, 2,048-token
//     system prompt, 128-token question, 256 output tokens, every prompt once in shuffled order.
//     Preset inference-perf is inference-perf's shared_prefix: 10 × 10, 100, 50, 50, prompts
//     drawn at random forever (Repeat). Turns > 1 makes each prompt a closed-loop session.
//   - synthetic-chat: ShareGPT-like conversations without the dataset. Turns per conversation
//     are geometric with mean 3.51 (ShareGPT: 330,239 turns in 94,145 conversations, as tabulated
//     in the ShareChat paper, arXiv 2512.17843), capped at 32; user messages and answers are
//     log-normal with means 161 and 338 tokens (ShareGPT's mean input and output lengths in the
//     vLLM/PagedAttention paper, SOSP'23, Fig. 11, which match its stated 8.4× and 5.8× ratios to
//     Alpaca's 19.31 and 58.45). Only the means are published: the log-normal shapes σ = 1.0
//     (prompts) and 0.8 (answers) are our assumption, and every length is clamped to 1..4096.
//     SystemPrompts > 0 adds shared system prompts (1,024 tokens by default) chosen uniformly.
//   - sharegpt: the public ShareGPT JSON (`[{"id", "conversations": [{"from", "value"}]}]`),
//     streamed with encoding/json's Decoder so memory does not grow with the file. Mode single
//     is `vllm bench serve --dataset-name sharegpt`: conversations with two or more messages,
//     shuffled with the seed, the first human message as the prompt, the token count of the
//     first gpt message after it as the output length (vllm takes messages 0 and 1, which is
//     the same unless a conversation starts with a system or gpt message), pruned when prompt < 4, output < 4, prompt > 1,024 or prompt + output > 2,048
//     tokens. Mode multi-turn replays whole conversations with their real answers in the
//     history (pruned at 6,144 prompt / 8,192 total tokens). Token counts come from the
//     Tokenizer given WithTokenizer (the cmd layer passes tiktoken); the default ChunkTokenizer
//     counts one token per 4 bytes. Shuffling indexes the file once (16 bytes per conversation)
//     and reads conversations at their offsets; vllm's Python shuffle order is not reproduced.
//   - mooncake: Mooncake JSONL traces (`timestamp` in ms, `input_length`, `output_length`,
//     `hash_ids` of 512-token blocks). Each hash id becomes a fixed block of token ids (and
//     text) derived from the id, so prefix reuse in the stream is exactly the trace's.
//   - azure: Azure LLM inference CSV traces (`TIMESTAMP,ContextTokens,GeneratedTokens`; also
//     Vidur's `arrived_at,num_prefill_tokens,num_decode_tokens`). Prompts are unique.
//   - chat-prefixes: KubeAI's prefix-aware load-balancing benchmark (benchmarks/chat-py in
//     substratusai/kubeai): every prefix of a ShareGPT-like conversation (at least MinTurns
//     turns) that ends with a user message is a prompt; the first Prompts of them are shuffled
//     and sent Rounds times over by Concurrency closed-loop clients. The conversations are
//     synthetic ShareGPT-like ones, with user messages and answers of mean PromptTokens and
//     AnswerTokens.
//   - mix: several tenants, each with its own workload. A tenant without an arrival of its own
//     receives a Weight-proportional share of the top-level arrivals; a tenant with one runs
//     independently at its own rate (a flooding tenant is one with a high rate).
//
// # Prompts
//
// Requests carry token ids and text that agree: Text is the concatenation of the Messages'
// contents and Tokens the concatenation of their ids, so requests that share a token prefix
// share the text prefix too. Generated content uses a synthetic vocabulary (see VocabSize and
// Words): each id is a short pronounceable word followed by a space, about 5 characters per
// token. Generated tokens are a pure function of the seed and what they stand for (group,
// question, hash id, turn), not of generation order.
//
// # Arrivals and sessions
//
// ArrivalConfig.Process is poisson, gamma (shape Burstiness, mean 1/Rate, as `vllm bench
// serve --burstiness`), constant, immediate (all at 0, vllm's rate inf) or trace (the trace's
// timestamps from its first record, times TimeScale). As in vllm, the first session arrives
// one gap after 0; Normalize rescales the first Requests arrivals so the last is exactly at
// Requests/Rate. Rates count sessions. Multi-turn sessions are closed-loop: Stream.Done at
// time t schedules turn k+1 at t plus the think time, carrying the whole history (system
// prompt, every user message and every answer). The answer in the history is the dataset's
// (ShareGPT), the one Done reports (live), or Request.AnswerTokens, which a simulator can
// "generate" so its prefix cache holds exactly what the next turn sends.
//
// Concurrency closed-loop clients (chat-prefixes, and shared-prefix with turns 1) hold a
// constant number of requests in flight instead: the arrival process starts each client
// (immediate: all at 0), and a client sends the source's next prompt the instant Done
// reports its previous one, until the source runs out or a cap ends the run. The prompts
// are the open-loop stream's, in the same order; only their timing is the loop's. A client
// is a session (its requests are turns of one Session, each a prompt of its own).
//
// # Load stages
//
// ArrivalConfig.Stages runs a load ladder in one run, as inference-perf's `load.stages`:
// [{rate, duration, warmup}] with process poisson, gamma or constant and no top-level rate.
// With Drain (the default) each stage is inference-perf's: it sends floor(rate·duration)
// sessions from a timer started 1 s after the stage begins (Poisson: each second draws a
// Poisson(rate) count, spaced by exponential gaps scaled to fill the second), ends at the
// first whole second after its duration at which all of them are done (Stream.Done), and the
// next stage begins StageInterval (1 s) later: caches stay warm, no backlog carries over. The
// stream waits on Done between stages, so InFlight counts the stage's open requests. With
// drain: false the stages run back to back on the clock, each for its duration, carrying the
// backlog. Stream.Stages and StageAt give the stages as they ran; a request belongs to the
// stage its arrival fell in. Shared-prefix Cycle sends inference-perf's prompt order: one
// shuffled list, in order, from its head again at every stage.
//
// # Configuration
//
// A zero field means the default for its kind; Config.Resolve fills them in and Validate
// checks ranges, kinds and fields that a kind does not use, joining every problem. YAML is
// decoded strictly by ParseConfig:
//
//	workload: {kind: shared-prefix, groups: 64, prompts_per_group: 16, system_prompt_tokens: 2048,
//	           question_tokens: 128, output_tokens: 256}
//	arrival: {process: poisson, rate: 10}
//	requests: 1024
//
// Fields by kind, with defaults:
//
//	shared-prefix   preset sglang|inference-perf; groups 64|10; prompts_per_group 16|10;
//	                system_prompt_tokens 2048|100; question_tokens 128|50; output_tokens 256|50;
//	                repeat false|true; cycle false (needs repeat); turns 1; think_time 0 and
//	                think_dist constant (turns > 1); concurrency 0 = open loop (turns 1)
//	synthetic-chat  mean_turns 3.51; max_turns 32; prompt_tokens 161; output_tokens 338;
//	                length_dist lognormal|exponential|constant; prompt_sigma 1.0; output_sigma 0.8;
//	                max_message_tokens 4096; system_prompts 0; system_prompt_tokens 1024;
//	                think_time 0; think_dist constant|exponential
//	sharegpt        path (required); mode single|multi-turn; shuffle true; min_tokens 4;
//	                max_prompt_tokens 1024 (6144 multi-turn); max_total_tokens 2048 (8192);
//	                output_tokens 0 = the dataset's (single only); max_turns 0 = all,
//	                think_time 0, think_dist constant (multi-turn only)
//	mooncake        path (required); block_tokens 512
//	azure           path (required)
//	chat-prefixes   prompts 800; rounds 10; concurrency 800; min_turns 8; prompt_tokens 50
//	                (mean user message); answer_tokens 106; output_tokens 76
//	mix             tenants: [{name, weight 1, workload, arrival (optional)}]
//	arrival         process poisson (trace for mooncake and azure); rate 10 sessions/s;
//	                burstiness 1 (gamma); time_scale 1 (trace); normalize false;
//	                stages [] ([{rate, duration, warmup false}], top level only, instead of
//	                rate); drain true and stage_interval 1s (with stages)
//	top level       requests 0 = no cap (turns included); duration 0 = no cap (caps apply
//	                on top of stages)
//
// # Bad input
//
// Malformed files give a *ParseError naming the file, the line or record, the byte offset
// where known, and the field. Traces are read a line at a time and ShareGPT an element at a
// time, so memory does not depend on file size. Nothing in the package panics on input.
//
// # Concurrency
//
// Stream's methods lock internally, so completions may call Done from any goroutine; one
// goroutine should own Peek and Next. The package never reads the wall clock: times are
// offsets from the start of the run, and all randomness comes from PCG and SplitMix64 streams
// derived from the seed given to Build.
package workloads
