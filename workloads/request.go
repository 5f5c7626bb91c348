package workloads

import "time"

// Role is the author of a chat message, as the OpenAI chat API names it.
type Role string

// The roles a Message can have.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one chat message of a request's history.
type Message struct {
	// Role is who wrote the message: system, user or assistant.
	Role Role `json:"role"`
	// Content is the message text.
	Content string `json:"content"`
}

// Request is one inference request of a workload: what to send and when.
//
// Tokens, Text and Messages describe the same prompt. Text is the concatenation of the
// Messages' contents in order, and Tokens is the concatenation of each message's token ids,
// so two requests whose Tokens share a prefix also share the corresponding Text prefix.
// Slices may share backing arrays with other requests of the same session: treat them as
// read-only.
type Request struct {
	// ID is unique within the stream and the same for every run with the same seed and
	// config: "r<n>" for single requests, "s<n>.<turn>" for turns of session "s<n>", both
	// prefixed with "<tenant>/" in a multi-tenant mix.
	ID string
	// Arrival is when to send the request, as an offset from the start of the run.
	Arrival time.Duration
	// Tenant names the tenant in a multi-tenant mix; it is empty otherwise.
	Tenant string
	// Session identifies the conversation a turn belongs to; it is empty for sources that
	// never produce follow-up turns.
	Session string
	// Turn is the 0-based index of the turn within its session (0 for single requests).
	Turn int
	// PrefixGroup names the shared prefix the prompt starts with ("g<n>" for shared-prefix
	// groups, "sys<n>" for synthetic system prompts); it is empty when there is none.
	PrefixGroup string
	// Tokens holds the prompt's token ids: the whole history for a multi-turn session.
	Tokens []int32
	// Text is the prompt's text: the Messages' contents joined by a single space, as a router
	// flattens a chat request (router.Request.Prompt). It is empty when the stream was built
	// WithText(false).
	Text string
	// Messages is the prompt as chat messages (system, then alternating user and assistant,
	// ending with user). It is nil when the stream was built WithText(false).
	Messages []Message
	// OutputTokens is the answer length to request, in tokens (max_tokens with ignore_eos).
	// It is at least 1.
	OutputTokens int
	// FollowUp reports that the session continues after this request: its next turn is
	// scheduled when Stream.Done reports this request finished.
	FollowUp bool
	// AnswerTokens, set only when FollowUp is true, holds the token ids (OutputTokens of
	// them) that the stream appends to the history as this turn's answer unless Done reports
	// different ones. A simulator that "generates" exactly these tokens caches the blocks the
	// next turn will send.
	AnswerTokens []int32
}

// Completion reports how a request ended, to Stream.Done.
type Completion struct {
	// At is when the answer finished, as an offset from the start of the run; it must not be
	// before the request's Arrival.
	At time.Duration
	// Failed ends the request's session: no further turn is issued.
	Failed bool
	// Text, when not empty, is the answer actually received (a live run); it replaces the
	// expected answer in the session's history. Its token ids come from Tokens, or from the
	// stream's Tokenizer when Tokens is nil.
	Text string
	// Tokens, when not nil, are the answer's token ids. Without Text they are read as ids of
	// the synthetic vocabulary (see Words) to make the history's text.
	Tokens []int32
}
