// Package openai holds the small part of the OpenAI HTTP API that kvroute's proxy, emulator and
// load generator share: parsing chat and completion request bodies into what a router needs,
// reading token usage from responses (whole JSON bodies and server-sent-event streams), the
// model list, and OpenAI-style error bodies and error events.
//
// Parsing is deliberately partial: callers forward the original bytes unchanged and only read
// the fields a routing decision or an accounting record needs.
package openai
