package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/go-zeromq/zmq4"
)

// Publisher publishes batches as vLLM's ZmqEventPublisher does: PUB frames [topic, seq,
// payload] with seq counting from 0, and an optional replay ROUTER serving the last
// Buffer batches.
type Publisher struct {
	pub    zmq4.Socket
	replay zmq4.Socket
	topic  []byte

	mu     sync.Mutex
	seq    uint64
	buf    []buffered // ring of the last cap(buf) batches
	closed bool
}

type buffered struct {
	seq     uint64
	payload []byte
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Endpoint: bound when it holds '*' or is ipc:// (vLLM's rule) or Bind is set, dialed
	// otherwise.
	Endpoint, Topic string
	Bind            bool
	// Replay, when set, is bound as the replay ROUTER endpoint.
	Replay string
	// Buffer is how many batches the replay buffer keeps (vLLM's buffer_steps, 10,000).
	Buffer int
}

// NewPublisher opens the sockets. Close releases them.
func NewPublisher(ctx context.Context, cfg PublisherConfig) (*Publisher, error) {
	p := &Publisher{topic: []byte(cfg.Topic), pub: zmq4.NewPub(ctx, zmq4.WithDialerMaxRetries(-1))}
	var err error
	if cfg.Bind || strings.Contains(cfg.Endpoint, "*") || strings.HasPrefix(cfg.Endpoint, "ipc://") {
		err = p.pub.Listen(strings.Replace(cfg.Endpoint, "*", "0.0.0.0", 1))
	} else {
		err = p.pub.Dial(cfg.Endpoint)
	}
	if err != nil {
		p.pub.Close()
		return nil, fmt.Errorf("kvevents: publisher %s: %w", cfg.Endpoint, err)
	}
	if cfg.Replay != "" {
		p.buf = make([]buffered, 0, max(cfg.Buffer, 1))
		p.replay = zmq4.NewRouter(ctx)
		if err := p.replay.Listen(cfg.Replay); err != nil {
			p.pub.Close()
			return nil, fmt.Errorf("kvevents: replay %s: %w", cfg.Replay, err)
		}
		go p.serveReplay()
	}
	return p, nil
}

// Publish sends one payload with the next sequence number.
func (p *Publisher) Publish(payload []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("kvevents: publisher closed")
	}
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], p.seq)
	p.remember(payload)
	return p.pub.Send(zmq4.NewMsgFrom(p.topic, seq[:], payload))
}

// Skip advances the sequence number without sending, as a lost message would (for tests of
// gap handling); the batch still enters the replay buffer.
func (p *Publisher) Skip(payload []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remember(payload)
}

// remember puts the batch numbered p.seq in the replay ring and advances p.seq.
func (p *Publisher) remember(payload []byte) {
	if p.buf != nil {
		b := buffered{p.seq, payload}
		if len(p.buf) < cap(p.buf) {
			p.buf = append(p.buf, b)
		} else {
			p.buf[p.seq%uint64(cap(p.buf))] = b
		}
	}
	p.seq++
}

// since returns the buffered batches numbered start or later, oldest first.
func (p *Publisher) since(start uint64) []buffered {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []buffered
	n := uint64(len(p.buf))
	for i := range n {
		b := p.buf[i]
		if n == uint64(cap(p.buf)) { // full: the oldest is where the next one goes
			b = p.buf[(p.seq+i)%n]
		}
		if b.seq >= start {
			out = append(out, b)
		}
	}
	return out
}

func (p *Publisher) serveReplay() {
	for {
		msg, err := p.replay.Recv()
		if err != nil {
			return // closed
		}
		if len(msg.Frames) != 3 || len(msg.Frames[2]) != 8 {
			continue // vLLM logs and ignores a malformed request too
		}
		id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[2])
		out := p.since(start)
		var seq [8]byte
		for _, b := range out {
			binary.BigEndian.PutUint64(seq[:], b.seq)
			_ = p.replay.Send(zmq4.NewMsgFrom(id, []byte{}, seq[:], b.payload))
		}
		binary.BigEndian.PutUint64(seq[:], endSeq)
		_ = p.replay.Send(zmq4.NewMsgFrom(id, []byte{}, seq[:], []byte{}))
	}
}

// Close closes the sockets.
func (p *Publisher) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	if p.replay != nil {
		p.replay.Close()
	}
	return p.pub.Close()
}
