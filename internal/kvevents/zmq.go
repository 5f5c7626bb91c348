package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
)

// Topic returns the topic vLLM deployments publish under: kv@<pod>@<model>
// (vLLM's --kv-events-config "topic"; llm-d's guides set kv@${POD_IP}@<model>).
func Topic(pod, model string) string { return "kv@" + pod + "@" + model }

// ParseTopic splits kv@<pod>@<model>. The pod may hold ':' (llm-d-inference-sim uses
// <POD_IP>:<port>); the model is everything after the second '@'.
func ParseTopic(topic string) (pod, model string, ok bool) {
	rest, ok := strings.CutPrefix(topic, "kv@")
	if !ok {
		return "", "", false
	}
	pod, model, ok = strings.Cut(rest, "@")
	if !ok || pod == "" {
		return "", "", false
	}
	return pod, model, true
}

// Source is one ZMQ stream of KV events.
type Source struct {
	// Endpoint is a ZMQ address (tcp://host:port).
	Endpoint string
	// Bind listens on Endpoint for replicas that dial it (llm-d's centralized mode;
	// llm-d-inference-sim's --zmq-endpoint); otherwise the subscriber dials the replica's
	// publisher (vLLM's --kv-events-config endpoint tcp://*:5557).
	Bind bool
	// Replay is the replica's replay ROUTER endpoint (vLLM's replay_endpoint), used to fill
	// sequence gaps; "" marks the replica stale on a gap instead. Dial mode only.
	Replay string
	// ID, when set, owns every event of this source whatever its topic says (in connect
	// mode: the replica whose publisher is dialed). "" takes the replica from each topic's
	// pod, mapped through Subscriber.Resolve: anyone who can send on the socket can then
	// speak for any replica Resolve accepts.
	ID string
	// Model is the served model name, the salt of the first block's key, for messages whose
	// topic is not kv@<pod>@<model> (vLLM's default topic is empty); a topic's model wins.
	Model string
}

// Subscriber feeds an Index from Sources.
type Subscriber struct {
	Index *Index
	// Resolve maps a topic's pod to a configured replica's endpoint ID, for sources without
	// an ID; messages of a pod it rejects, or of any pod when it is nil, are dropped and
	// counted (Stats.DroppedTopic).
	Resolve func(pod string) (string, bool)
	// Wire bounds what peers can make the subscriber hold; the zero value means
	// DefaultWireLimits.
	Wire WireLimits
	// RetryInterval is the pause before redialing a lost publisher (default 250 ms).
	RetryInterval time.Duration
	// ReplayTimeout bounds one replay request (default 2 s).
	ReplayTimeout time.Duration
	// OnError, when set, hears per-message problems (undecodable payloads, replay failures).
	OnError func(error)
}

// Run reads src until ctx is done. It returns an error only when a bound endpoint cannot be
// listened on. In dial mode a lost connection (the replica restarted) or a failed dial is
// retried with a new socket every RetryInterval: zmq4's own automatic reconnect races with
// Close, and would dial a bound endpoint's own address.
func (s *Subscriber) Run(ctx context.Context, src Source) error {
	if err := s.wire().Validate(); err != nil {
		return err
	}
	for {
		sub, err := s.open(ctx, src)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && src.Bind:
			return err
		case err == nil:
			err = s.read(ctx, src, sub)
			sub.Close()
			if ctx.Err() != nil {
				return nil
			}
		}
		s.report(fmt.Errorf("kvevents: %s: %w; redialing", src.Endpoint, err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(s.retry()):
		}
	}
}

func (s *Subscriber) retry() time.Duration {
	if s.RetryInterval > 0 {
		return s.RetryInterval
	}
	return 250 * time.Millisecond
}

func (s *Subscriber) wire() WireLimits {
	if s.Wire == (WireLimits{}) {
		return DefaultWireLimits()
	}
	return s.Wire
}

// guard returns a guard for one socket of type own, counting into the index.
func (s *Subscriber) guard(own zmq4.SocketType) *guard {
	return &guard{lim: s.wire(), own: own, count: s.Index.countWire}
}

// open makes a guarded SUB socket for src. A source with an ID subscribes to every topic
// (vLLM's default topic is empty); one without takes only kv@ topics.
func (s *Subscriber) open(ctx context.Context, src Source) (zmq4.Socket, error) {
	ep, err := guardedEndpoint(src.Endpoint)
	if err != nil {
		return nil, err
	}
	sub, err := guardedSocket(ctx, s.guard(zmq4.Sub), zmq4.NewSub,
		zmq4.WithDialerMaxRetries(0), zmq4.WithLogger(log.New(reportWriter{s}, "", 0)))
	if err != nil {
		return nil, err
	}
	if src.Bind {
		err = sub.Listen(ep)
	} else {
		err = sub.Dial(ep)
	}
	if err == nil {
		topic := "kv@"
		if src.ID != "" {
			topic = ""
		}
		err = sub.SetOption(zmq4.OptionSubscribe, topic)
	}
	if err != nil {
		sub.Close()
		return nil, fmt.Errorf("kvevents: %s: %w", src.Endpoint, err)
	}
	return sub, nil
}

// reportWriter hands zmq4's log lines (a failed handshake on a bound socket) to OnError.
type reportWriter struct{ s *Subscriber }

func (w reportWriter) Write(p []byte) (int, error) {
	w.s.report(fmt.Errorf("kvevents: %s", bytes.TrimSpace(p)))
	return len(p), nil
}

// read handles messages until the (dialed) connection fails or ctx is done.
func (s *Subscriber) read(ctx context.Context, src Source, sub zmq4.Socket) error {
	for {
		msg, err := sub.Recv()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil && !src.Bind:
			return err
		case err != nil: // one dialing replica went away; the listener keeps the others
			s.report(fmt.Errorf("kvevents: %s: receive: %w", src.Endpoint, err))
		default:
			s.handle(ctx, src, msg)
		}
	}
}

func (s *Subscriber) report(err error) {
	if s.OnError != nil {
		s.OnError(err)
	}
}

// handle applies one [topic, seq, payload] message; zmq4 hands ZMTP commands (a PING) to
// Recv too, and they are ignored.
func (s *Subscriber) handle(ctx context.Context, src Source, msg zmq4.Msg) {
	if msg.Type == zmq4.CmdMsg {
		return
	}
	frames := msg.Frames
	if len(frames) != 3 || len(frames[1]) != 8 {
		s.Index.countDrop(dropMalformed)
		s.report(fmt.Errorf("kvevents: %s: message of %d frames, want topic, 8-byte seq, payload", src.Endpoint, len(frames)))
		return
	}
	id, model, err := s.owner(src, frames[0])
	if err != nil {
		s.Index.countDrop(dropTopic)
		s.report(fmt.Errorf("kvevents: %s: %w", src.Endpoint, err))
		return
	}
	var fill Filler
	if src.Replay != "" && !src.Bind {
		fill = func(g Gap) ([][]byte, error) { return s.replay(ctx, src.Replay, g) }
	}
	if err := s.Index.Handle(id, model, binary.BigEndian.Uint64(frames[1]), frames[2], fill); err != nil {
		s.report(fmt.Errorf("kvevents: %s (%s): %w", src.Endpoint, id, err))
	}
}

// owner returns the replica a message of src with this topic belongs to, and its model:
// src.ID when set, else the topic's pod as Resolve maps it.
func (s *Subscriber) owner(src Source, topic []byte) (id, model string, err error) {
	pod, model, ok := ParseTopic(string(topic))
	if src.ID != "" {
		if !ok {
			model = src.Model
		}
		return src.ID, model, nil
	}
	if !ok {
		return "", "", fmt.Errorf("topic %q is not kv@<pod>@<model>", topic)
	}
	if s.Resolve != nil {
		if id, ok = s.Resolve(pod); ok {
			return id, model, nil
		}
	}
	return "", "", fmt.Errorf("topic %q names no configured replica", topic)
}

// maxReplayBatches bounds the gap a replay is asked for: vLLM's replay buffer keeps
// buffer_steps (10,000) batches, so a larger gap cannot be filled (and a forged sequence
// number must not make the router collect one).
const maxReplayBatches = 10_000

// endSeq is the replay stream's end marker, -1 as 8 big-endian bytes (vLLM END_SEQ).
const endSeq = ^uint64(0)

// replay asks a vLLM replay ROUTER for the batches of g: it sends [empty, start seq] from a
// DEALER and reads [empty, seq, payload] replies until the end marker (vLLM
// ZmqEventPublisher._service_replay).
func (s *Subscriber) replay(ctx context.Context, endpoint string, g Gap) ([][]byte, error) {
	d := s.ReplayTimeout
	if d <= 0 {
		d = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	lim := s.wire()
	if g.To-g.From > maxReplayBatches {
		return nil, fmt.Errorf("a gap of %d messages, more than a replay buffer holds (%d)", g.To-g.From, maxReplayBatches)
	}
	ep, err := guardedEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	dealer, err := guardedSocket(ctx, s.guard(zmq4.Dealer), zmq4.NewDealer,
		zmq4.WithDialerMaxRetries(2), zmq4.WithLogger(log.New(reportWriter{s}, "", 0)))
	if err != nil {
		return nil, err
	}
	defer dealer.Close()
	if err := dealer.Dial(ep); err != nil {
		return nil, err
	}
	var start [8]byte
	binary.BigEndian.PutUint64(start[:], g.From)
	if err := dealer.Send(zmq4.NewMsgFrom([]byte{}, start[:])); err != nil {
		return nil, err
	}
	var out [][]byte
	next, held := g.From, 0
	for {
		msg, err := recvCtx(ctx, dealer)
		if err != nil {
			return nil, err
		}
		if len(msg.Frames) != 3 || len(msg.Frames[1]) != 8 {
			return nil, fmt.Errorf("replay reply of %d frames", len(msg.Frames))
		}
		seq := binary.BigEndian.Uint64(msg.Frames[1])
		switch {
		case seq == endSeq:
			if next < g.To {
				return nil, fmt.Errorf("replay ended at %d, gap is [%d, %d): the buffer no longer holds it", next, g.From, g.To)
			}
			return out, nil
		case seq < next || seq >= g.To: // before the gap, or already applied
			continue
		case seq > next:
			return nil, fmt.Errorf("replay skipped from %d to %d", next, seq)
		}
		if held += len(msg.Frames[2]); held > lim.MaxReplayBytes {
			return nil, fmt.Errorf("replay of more than %d bytes", lim.MaxReplayBytes)
		}
		out = append(out, msg.Frames[2])
		next++
	}
}

// recvCtx is Recv bounded by ctx (zmq4's Recv does not watch the context by itself once
// the connection is up).
func recvCtx(ctx context.Context, s zmq4.Socket) (zmq4.Msg, error) {
	type res struct {
		m   zmq4.Msg
		err error
	}
	ch := make(chan res, 1)
	go func() { m, err := s.Recv(); ch <- res{m, err} }()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-ctx.Done():
		return zmq4.Msg{}, ctx.Err()
	}
}
