package openai

// DefaultMaxBodyBytes is the largest request body, in bytes (16 MiB), that the router
// (limits.max_body_bytes) and the emulator (max_body_bytes) accept unless configured
// otherwise: one default, so that a body the router forwards is one an emulated replica takes.
const DefaultMaxBodyBytes = 16 << 20
