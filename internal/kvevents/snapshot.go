package kvevents

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Snapshot is an Index's state at one instant: per replica, the last sequence number it
// applied and the blocks it holds, each as the engine's key and the router's key. A router
// that starts late loads a peer's snapshot (Index.Load), then applies the events numbered
// after each replica's Seq.
type Snapshot struct {
	Endpoints []EndpointSnapshot
}

// EndpointSnapshot is one replica's part of a Snapshot.
type EndpointSnapshot struct {
	// ID is the replica's endpoint ID in the index that took the snapshot (the router's
	// backend name); URL, when set, is its base URL, so that a router naming its backends
	// differently can still map it.
	ID, URL string
	// Seq is the last sequence number applied; Started is false when no message was.
	Seq     uint64
	Started bool
	// Stale is set when the index had missed messages it could not recover.
	Stale bool
	// Keys are the blocks held, sorted by engine key.
	Keys []KeyPair
}

// KeyPair maps an engine's block key to the router's key for the same block.
type KeyPair struct{ Engine, Router uint64 }

// Blocks returns how many blocks s holds over all replicas.
func (s Snapshot) Blocks() int {
	n := 0
	for _, e := range s.Endpoints {
		n += len(e.Keys)
	}
	return n
}

// Snapshot returns the index's state, replicas sorted by ID.
func (x *Index) Snapshot() Snapshot {
	x.mu.Lock()
	defer x.mu.Unlock()
	s := Snapshot{Endpoints: make([]EndpointSnapshot, 0, len(x.eps))}
	for id, e := range x.eps {
		es := EndpointSnapshot{ID: id, Seq: e.seq, Started: e.started, Stale: e.stale, Keys: make([]KeyPair, 0, len(e.keys))}
		for ek, rk := range e.keys {
			if e.refs[tierKey{ek, gpu}] == 0 {
				continue // snapshots carry the GPU tier only
			}
			es.Keys = append(es.Keys, KeyPair{ek, rk})
		}
		slices.SortFunc(es.Keys, func(a, b KeyPair) int { return cmp.Compare(a.Engine, b.Engine) })
		s.Endpoints = append(s.Endpoints, es)
	}
	slices.SortFunc(s.Endpoints, func(a, b EndpointSnapshot) int { return cmp.Compare(a.ID, b.ID) })
	return s
}

// snapshotMagic opens the binary form of a Snapshot; its last byte is the format version.
var snapshotMagic = []byte("KVRSNAP\x01")

// SnapshotLimits bound what ReadSnapshot accepts.
type SnapshotLimits struct {
	MaxEndpoints int // replicas in one snapshot
	MaxKeys      int // blocks of one replica (IndexConfig.MaxKeysPerEndpoint)
	MaxString    int // bytes of an ID or URL
}

// DefaultSnapshotLimits: 4,096 replicas, DefaultIndexConfig's 4M blocks each, 1 KiB names.
func DefaultSnapshotLimits() SnapshotLimits {
	return SnapshotLimits{MaxEndpoints: 4096, MaxKeys: DefaultIndexConfig().MaxKeysPerEndpoint, MaxString: 1024}
}

// WriteTo writes s in its binary form: the magic "KVRSNAP" and version byte 1, the number
// of replicas (uvarint), then per replica its ID and URL (uvarint length, bytes), Seq
// (uvarint), a flags byte (1: started, 2: stale), the number of blocks (uvarint) and each
// block's engine and router keys (8 bytes each, big-endian).
func (s Snapshot) WriteTo(w io.Writer) (int64, error) {
	bw := &countWriter{w: bufio.NewWriterSize(w, 64<<10)}
	bw.write(snapshotMagic)
	bw.uvarint(uint64(len(s.Endpoints)))
	var pair [16]byte
	for _, e := range s.Endpoints {
		bw.str(e.ID)
		bw.str(e.URL)
		bw.uvarint(e.Seq)
		var flags byte
		if e.Started {
			flags |= 1
		}
		if e.Stale {
			flags |= 2
		}
		bw.write([]byte{flags})
		bw.uvarint(uint64(len(e.Keys)))
		for _, k := range e.Keys {
			binary.BigEndian.PutUint64(pair[:8], k.Engine)
			binary.BigEndian.PutUint64(pair[8:], k.Router)
			bw.write(pair[:])
		}
	}
	if bw.err == nil {
		bw.err = bw.w.(*bufio.Writer).Flush()
	}
	return bw.n, bw.err
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) write(p []byte) {
	if c.err == nil {
		var k int
		k, c.err = c.w.Write(p)
		c.n += int64(k)
	}
}

func (c *countWriter) uvarint(v uint64) { c.write(binary.AppendUvarint(nil, v)) }

func (c *countWriter) str(s string) { c.uvarint(uint64(len(s))); c.write([]byte(s)) }

// ErrSnapshot is wrapped by every error of ReadSnapshot about the data itself.
var ErrSnapshot = errors.New("kvevents: malformed snapshot")

// ReadSnapshot reads the binary form WriteTo writes. It never allocates more than the data
// it has read justifies: counts over lim are errors, and key lists grow as keys arrive.
func ReadSnapshot(r io.Reader, lim SnapshotLimits) (Snapshot, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != string(snapshotMagic) {
		return Snapshot{}, fmt.Errorf("%w: no KVRSNAP version 1 header", ErrSnapshot)
	}
	n, err := readCount(br, lim.MaxEndpoints, "replicas")
	if err != nil {
		return Snapshot{}, err
	}
	var s Snapshot
	for i := range n {
		e, err := readEndpoint(br, lim)
		if err != nil {
			return Snapshot{}, fmt.Errorf("replica %d: %w", i, err)
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return Snapshot{}, fmt.Errorf("%w: data after the last replica", ErrSnapshot)
	}
	return s, nil
}

func readEndpoint(br *bufio.Reader, lim SnapshotLimits) (EndpointSnapshot, error) {
	var e EndpointSnapshot
	var err error
	if e.ID, err = readString(br, lim.MaxString); err != nil {
		return e, err
	}
	if e.URL, err = readString(br, lim.MaxString); err != nil {
		return e, err
	}
	if e.Seq, err = binary.ReadUvarint(br); err != nil {
		return e, fmt.Errorf("%w: sequence number: %v", ErrSnapshot, err)
	}
	flags, err := br.ReadByte()
	if err != nil || flags > 3 {
		return e, fmt.Errorf("%w: flags", ErrSnapshot)
	}
	e.Started, e.Stale = flags&1 != 0, flags&2 != 0
	n, err := readCount(br, lim.MaxKeys, "blocks")
	if err != nil {
		return e, err
	}
	e.Keys = make([]KeyPair, 0, min(n, 4096))
	var pair [16]byte
	for range n {
		if _, err := io.ReadFull(br, pair[:]); err != nil {
			return e, fmt.Errorf("%w: truncated block list", ErrSnapshot)
		}
		e.Keys = append(e.Keys, KeyPair{binary.BigEndian.Uint64(pair[:8]), binary.BigEndian.Uint64(pair[8:])})
	}
	return e, nil
}

func readCount(br *bufio.Reader, limit int, what string) (int, error) {
	n, err := binary.ReadUvarint(br)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: count of %s: %v", ErrSnapshot, what, err)
	case limit > 0 && n > uint64(limit):
		return 0, fmt.Errorf("%w: %d %s (limit %d)", ErrSnapshot, n, what, limit)
	}
	return int(n), nil
}

func readString(br *bufio.Reader, limit int) (string, error) {
	n, err := readCount(br, limit, "string bytes")
	if err != nil {
		return "", err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", fmt.Errorf("%w: truncated string", ErrSnapshot)
	}
	return string(b), nil
}
