package kvevents

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Kind is an event type.
type Kind uint8

// The event types vLLM publishes (kv_events.py: BlockStored, BlockRemoved, AllBlocksCleared).
const (
	BlockStored Kind = iota + 1
	BlockRemoved
	AllBlocksCleared
)

func (k Kind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Event is one decoded KV event. Engine hashes are normalized to uint64: an int hash as is, a
// bytes hash (vLLM's sha256 ExternalBlockHash) by its xxhash64.
type Event struct {
	Kind      Kind
	Hashes    []uint64 // block_hashes
	Parent    uint64   // parent_block_hash; valid when HasParent
	HasParent bool
	Tokens    []int32 // token_ids: len(Hashes) × BlockSize tokens
	BlockSize int
	LoRAName  string
	Medium    string // "GPU", "CPU", … or "" when absent
}

// Batch is one decoded KVEventBatch.
type Batch struct {
	TS     float64
	Events []Event
	// DPRank is data_parallel_rank, -1 when absent.
	DPRank int
	// Unknown counts events of a type this package does not know; they are skipped.
	Unknown int
}

// Limits bound what one payload may make the decoder allocate.
type Limits struct {
	MaxPayload int // bytes of one msgpack payload
	MaxEvents  int // events in one batch
	MaxTokens  int // token ids (and block hashes) in one event
}

// DefaultLimits allows batches far larger than vLLM sends (it publishes one batch per engine
// step) while keeping one payload's decoding under a few MiB.
func DefaultLimits() Limits {
	return Limits{MaxPayload: 8 << 20, MaxEvents: 65536, MaxTokens: 1 << 20}
}

// Errors Decode wraps.
var (
	ErrTooLarge  = errors.New("kvevents: over the configured limit")
	ErrMalformed = errors.New("kvevents: malformed batch")
)

// Decode parses one payload in either encoding. The returned batch's slices are fresh.
func Decode(payload []byte, lim Limits) (Batch, error) {
	if lim.MaxPayload > 0 && len(payload) > lim.MaxPayload {
		return Batch{}, fmt.Errorf("%w: payload of %d bytes (limit %d)", ErrTooLarge, len(payload), lim.MaxPayload)
	}
	d := decoder{dec: msgpack.NewDecoder(bytes.NewReader(payload)), lim: lim}
	b, err := d.batch()
	if err != nil {
		return Batch{}, err
	}
	return b, nil
}

type decoder struct {
	dec *msgpack.Decoder
	lim Limits
}

func malformed(what string, err error) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrMalformed) {
		return err
	}
	return fmt.Errorf("%w: %s: %v", ErrMalformed, what, err)
}

// container reads an array or map header: n elements (or pairs), isMap.
func (d *decoder) container(what string) (int, bool, error) {
	c, err := d.dec.PeekCode()
	if err != nil {
		return 0, false, malformed(what, err)
	}
	switch {
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := d.dec.DecodeMapLen()
		if err != nil {
			return 0, false, malformed(what, err)
		}
		return n, true, nil
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := d.dec.DecodeArrayLen()
		if err != nil {
			return 0, false, malformed(what, err)
		}
		return n, false, nil
	}
	return 0, false, fmt.Errorf("%w: %s: want an array or a map, got code 0x%02x", ErrMalformed, what, c)
}

func (d *decoder) batch() (Batch, error) {
	b := Batch{DPRank: -1}
	n, isMap, err := d.container("batch")
	if err != nil {
		return b, err
	}
	for i := range n {
		field := i // positional: ts, events, data_parallel_rank
		if isMap {
			key, err := d.dec.DecodeString()
			if err != nil {
				return b, malformed("batch key", err)
			}
			field = fieldIndex(batchFields, key)
		}
		if err := d.batchField(&b, field); err != nil {
			return b, err
		}
	}
	if n < 2 && !isMap {
		return b, fmt.Errorf("%w: batch array of %d elements, want ts and events", ErrMalformed, n)
	}
	return b, nil
}

func (d *decoder) batchField(b *Batch, field int) error {
	var err error
	switch field {
	case 0:
		b.TS, err = d.dec.DecodeFloat64()
	case 1:
		err = d.events(b)
	case 2:
		if d.nextIsNil() {
			err = d.dec.DecodeNil()
		} else {
			b.DPRank, err = d.dec.DecodeInt()
			if err == nil && b.DPRank < 0 {
				err = fmt.Errorf("negative rank %d", b.DPRank)
			}
		}
	default:
		err = d.skip(0)
	}
	if err != nil {
		return malformed("batch field", err)
	}
	return nil
}

// Field names in declaration order: a positional array holds them in this order (msgspec
// array_like, omit_defaults drops trailing defaults); a map names them.
var (
	batchFields   = []string{"ts", "events", "data_parallel_rank"}
	storedFields  = []string{"block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id", "medium", "lora_name"}
	removedFields = []string{"block_hashes", "medium"}
)

func fieldIndex(fields []string, key string) int {
	for i, f := range fields {
		if f == key {
			return i
		}
	}
	return -1
}

func (d *decoder) events(b *Batch) error {
	n, err := d.dec.DecodeArrayLen()
	if err != nil {
		return malformed("events", err)
	}
	if d.lim.MaxEvents > 0 && n > d.lim.MaxEvents {
		return fmt.Errorf("%w: %d events (limit %d)", ErrTooLarge, n, d.lim.MaxEvents)
	}
	if n > 0 {
		b.Events = make([]Event, 0, min(n, 1024))
	}
	for range n {
		ev, ok, err := d.event()
		if err != nil {
			return err
		}
		if !ok {
			b.Unknown++
			continue
		}
		b.Events = append(b.Events, ev)
	}
	return nil
}

// event reads one tagged event: ["BlockStored", fields...] or {"type": "BlockStored", ...}.
// ok is false for an unknown type, whose fields are skipped.
func (d *decoder) event() (Event, bool, error) {
	n, isMap, err := d.container("event")
	if err != nil {
		return Event{}, false, err
	}
	if n == 0 {
		return Event{}, false, fmt.Errorf("%w: empty event", ErrMalformed)
	}
	var ev Event
	known, tagged := false, false
	for i := range n {
		name := ""
		switch {
		case isMap:
			if name, err = d.dec.DecodeString(); err != nil {
				return Event{}, false, malformed("event key", err)
			}
		case i == 0:
			name = "type"
		default:
			name = positional(ev.Kind, i-1)
		}
		if name == "type" {
			tag, err := d.dec.DecodeString()
			if err != nil {
				return Event{}, false, malformed("event tag", err)
			}
			ev.Kind, known, tagged = kindOf(tag), kindOf(tag) != 0, true
			continue
		}
		if err := d.eventField(&ev, name); err != nil {
			return Event{}, false, err
		}
	}
	if !tagged {
		return Event{}, false, fmt.Errorf("%w: event map without a type", ErrMalformed)
	}
	if !known {
		return Event{}, false, nil
	}
	return ev, true, d.check(&ev)
}

func kindOf(tag string) Kind {
	switch tag {
	case "BlockStored":
		return BlockStored
	case "BlockRemoved":
		return BlockRemoved
	case "AllBlocksCleared":
		return AllBlocksCleared
	}
	return 0
}

// positional names the i-th field after the tag of a positional event.
func positional(k Kind, i int) string {
	var fields []string
	switch k {
	case BlockStored:
		fields = storedFields
	case BlockRemoved:
		fields = removedFields
	}
	if i < len(fields) {
		return fields[i]
	}
	return "" // an unknown kind's fields, or fields newer than this package: skipped
}

// eventField decodes the field called name into ev (unknown names are skipped).
func (d *decoder) eventField(ev *Event, name string) error {
	var err error
	switch name {
	case "block_hashes":
		ev.Hashes, err = d.hashes()
	case "parent_block_hash":
		if d.nextIsNil() {
			err = d.dec.DecodeNil()
		} else {
			ev.Parent, err = d.hash()
			ev.HasParent = err == nil
		}
	case "token_ids":
		ev.Tokens, err = d.tokens()
	case "block_size":
		ev.BlockSize, err = d.dec.DecodeInt()
	case "medium", "lora_name":
		var s string
		if d.nextIsNil() {
			err = d.dec.DecodeNil()
		} else if s, err = d.dec.DecodeString(); name == "medium" {
			ev.Medium = s
		} else {
			ev.LoRAName = s
		}
	default:
		err = d.skip(0)
	}
	if err != nil {
		return malformed(name, err)
	}
	return nil
}

func (d *decoder) nextIsNil() bool {
	c, err := d.dec.PeekCode()
	return err == nil && c == msgpcode.Nil
}

// hash reads one ExternalBlockHash: an int, or bytes (folded to 64 bits by xxhash).
func (d *decoder) hash() (uint64, error) {
	c, err := d.dec.PeekCode()
	if err != nil {
		return 0, err
	}
	if msgpcode.IsBin(c) || msgpcode.IsString(c) {
		// msgpack's DecodeBytes allocates the length the header claims before reading: a
		// 5-byte header could claim 4 GiB. A block hash is a digest (sha256: 32 bytes).
		n, err := d.dec.DecodeBytesLen()
		if err != nil {
			return 0, err
		}
		if n < 0 || n > maxHashBytes {
			return 0, fmt.Errorf("%w: a block hash of %d bytes (limit %d)", ErrTooLarge, n, maxHashBytes)
		}
		var buf [maxHashBytes]byte
		if err := d.dec.ReadFull(buf[:n]); err != nil {
			return 0, err
		}
		return xxhash.Sum64(buf[:n]), nil
	}
	if c == msgpcode.Uint64 {
		return d.dec.DecodeUint64()
	}
	v, err := d.dec.DecodeInt64()
	return uint64(v), err
}

func (d *decoder) listLen(what string) (int, error) {
	n, err := d.dec.DecodeArrayLen()
	if err != nil {
		return 0, err
	}
	if d.lim.MaxTokens > 0 && n > d.lim.MaxTokens {
		return 0, fmt.Errorf("%w: %s of %d elements (limit %d)", ErrTooLarge, what, n, d.lim.MaxTokens)
	}
	return max(n, 0), nil
}

func (d *decoder) hashes() ([]uint64, error) {
	n, err := d.listLen("block_hashes")
	if err != nil {
		return nil, err
	}
	out := make([]uint64, 0, min(n, 4096))
	for range n {
		h, err := d.hash()
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

func (d *decoder) tokens() ([]int32, error) {
	n, err := d.listLen("token_ids")
	if err != nil {
		return nil, err
	}
	out := make([]int32, 0, min(n, 65536))
	for range n {
		t, err := d.dec.DecodeInt64()
		if err != nil {
			return nil, err
		}
		if t < 0 || t > 1<<32-1 {
			return nil, fmt.Errorf("token id %d out of range", t)
		}
		// Ids are 32-bit (llm-d-inference-sim's fake tokenizer uses the whole uint32 range):
		// kept bit for bit, as the router's block hash reads them (uint32(t)).
		out = append(out, int32(uint32(t)))
	}
	return out, nil
}

// check enforces what a consumer relies on: a BlockStored's tokens fill its blocks.
func (d *decoder) check(ev *Event) error {
	if ev.Kind != BlockStored || len(ev.Tokens) == 0 {
		return nil // a BlockStored without tokens (CPU offload) is resolved by engine key
	}
	if ev.BlockSize <= 0 || len(ev.Tokens) != len(ev.Hashes)*ev.BlockSize {
		return fmt.Errorf("%w: BlockStored with %d hashes, %d tokens, block_size %d",
			ErrMalformed, len(ev.Hashes), len(ev.Tokens), ev.BlockSize)
	}
	return nil
}

// maxHashBytes bounds a bytes block hash (vLLM's are 32-byte sha256 digests).
const maxHashBytes = 64

// maxDepth bounds the nesting of skipped values: msgpack's own Skip recurses without limit,
// so a payload of nested one-element arrays could exhaust the stack.
const maxDepth = 16

// skip skips one value of a field this package does not read (extra_keys, lora_id, …).
func (d *decoder) skip(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: nested deeper than %d", ErrMalformed, maxDepth)
	}
	c, err := d.dec.PeekCode()
	if err != nil {
		return err
	}
	var n int
	switch {
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		if n, err = d.dec.DecodeMapLen(); err != nil {
			return err
		}
		n *= 2
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		if n, err = d.dec.DecodeArrayLen(); err != nil {
			return err
		}
	default:
		return d.dec.Skip() // a scalar, a string or bytes: no recursion
	}
	for range n {
		if err := d.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}
