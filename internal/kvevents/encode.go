package kvevents

import (
	"bytes"

	"github.com/vmihailenco/msgpack/v5"
)

// Encoding selects how Encode lays out structs.
type Encoding uint8

const (
	// Positional encodes each struct as an array of its fields in declaration order, the
	// event's type name first (msgspec array_like with tag; vLLM before PR #42892 and
	// llm-d-inference-sim's default).
	Positional Encoding = iota
	// Named encodes each struct as a map of field names, the event's type under "type"
	// (vLLM PR #42892; llm-d-inference-sim --use-vllm-map-event-format).
	Named
)

// Encode writes b as a KVEventBatch payload, engine hashes as unsigned ints. It is what the
// emulator publishes, and what the tests feed the decoder.
func Encode(b Batch, enc Encoding) []byte {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	w := writer{e: e, named: enc == Named}
	n := 2
	if b.DPRank >= 0 {
		n = 3
	}
	w.open(n)
	w.key("ts")
	_ = e.EncodeFloat64(b.TS)
	w.key("events")
	_ = e.EncodeArrayLen(len(b.Events))
	for i := range b.Events {
		w.event(&b.Events[i])
	}
	if b.DPRank >= 0 {
		w.key("data_parallel_rank")
		_ = e.EncodeInt(int64(b.DPRank))
	}
	return buf.Bytes() // writes to a bytes.Buffer do not fail
}

type writer struct {
	e     *msgpack.Encoder
	named bool
}

func (w writer) open(n int) {
	if w.named {
		_ = w.e.EncodeMapLen(n)
	} else {
		_ = w.e.EncodeArrayLen(n)
	}
}

func (w writer) key(k string) {
	if w.named {
		_ = w.e.EncodeString(k)
	}
}

func (w writer) optString(s string) {
	if s == "" {
		_ = w.e.EncodeNil()
	} else {
		_ = w.e.EncodeString(s)
	}
}

func (w writer) event(ev *Event) {
	e := w.e
	switch ev.Kind {
	case BlockStored:
		w.open(1 + len(storedFields))
	case BlockRemoved:
		w.open(1 + len(removedFields))
	default:
		w.open(1)
	}
	w.key("type")
	_ = e.EncodeString(ev.Kind.String())
	if ev.Kind == AllBlocksCleared {
		return
	}
	w.key("block_hashes")
	_ = e.EncodeArrayLen(len(ev.Hashes))
	for _, h := range ev.Hashes {
		_ = e.EncodeUint64(h)
	}
	if ev.Kind == BlockRemoved {
		w.key("medium")
		w.optString(ev.Medium)
		return
	}
	w.key("parent_block_hash")
	if ev.HasParent {
		_ = e.EncodeUint64(ev.Parent)
	} else {
		_ = e.EncodeNil()
	}
	w.key("token_ids")
	_ = e.EncodeArrayLen(len(ev.Tokens))
	for _, t := range ev.Tokens {
		_ = e.EncodeUint(uint64(uint32(t)))
	}
	w.key("block_size")
	_ = e.EncodeInt(int64(ev.BlockSize))
	w.key("lora_id")
	_ = e.EncodeNil()
	w.key("medium")
	w.optString(ev.Medium)
	w.key("lora_name")
	w.optString(ev.LoRAName)
}
