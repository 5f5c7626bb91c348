// Package kvevents reads the KV-cache events vLLM publishes and turns them into router keys.
//
// vLLM (vllm/distributed/kv_events.py, read at commit 0181ea31) publishes a KVEventBatch
// {ts, events, data_parallel_rank} of BlockStored, BlockRemoved and AllBlocksCleared events
// over a ZMQ PUB socket as three frames: topic (kv@<pod>@<model> by convention), an 8-byte
// big-endian sequence number, and the msgpack payload. Older releases and
// llm-d-inference-sim's default encode every struct as a positional array (msgspec
// array_like); vLLM PR #42892 and llm-d-inference-sim --use-vllm-map-event-format encode them
// as maps of named fields with a "type" tag. Decode reads both.
//
// A replica's events carry the engine's own block hashes (sha256 or a seeded hash, ints or
// bytes): an Index keeps, per replica, engine key → router key, where the router key is the
// chained hash of the block's token ids (router/prefix.TokenBlockHash, seeded with the model
// name), so a router's keys do not depend on the engine's hash algorithm or PYTHONHASHSEED
// (llm-d-kv-cache's "dual keys").
//
// A Subscriber reads one ZMQ stream (connecting to each replica's publisher, or binding one
// endpoint the replicas dial), checks sequence numbers per topic, asks the replica's replay
// ROUTER socket for a gap when one is configured and otherwise marks that replica stale.
//
// The event socket faces peers that cannot authenticate (vLLM's publisher has no security
// mechanism), so nothing a peer sends may crash the router or take memory past WireLimits.
// The ZMQ library stays go-zeromq/zmq4 (pure Go, so CI and the static image build without
// libzmq or cgo; pebbe/zmq4 over libzmq would bring its own ZMQ_MAXMSGSIZE but needs the
// system library and cgo in every build). zmq4 trusts its peers (it allocates what a frame
// header claims, and panics on malformed handshakes), so every socket a Subscriber opens
// dials and listens through a guarded transport (guard.go): each connection's bytes run
// through a ZMTP 3.x parser (zmtp.go) that closes the connection before zmq4 reads a header
// or command breaking a bound. A payload that does not decode changes nothing; a Source with
// an ID owns its events whatever their topic says, and a topic counts only when Resolve
// maps it to a configured replica. docs/kv-events.md ("Threat model") says which topology
// to run.
//
// Several routers share the replicas' events. A Forwarder binds the one endpoint replicas
// that dial can reach and re-publishes their messages unchanged for any number of routers. A
// router that starts late loads a peer's Snapshot (Index.Load, the messages held back by
// Index.Hold meanwhile) or asks the replicas' replay buffers for their history; one that
// ejected a replica keeps its index until the replica's next message says whether it
// restarted (Index.Suspend).
package kvevents
