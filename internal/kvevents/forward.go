package kvevents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/go-zeromq/zmq4"
)

// ForwarderConfig configures a Forwarder.
type ForwarderConfig struct {
	// Listen is bound for the replicas that dial it (llm-d-inference-sim's --zmq-endpoint,
	// llm-d's centralized mode): only one process can bind it.
	Listen string
	// Publish is bound as a PUB socket that routers dial (kv_events.connect with a bare
	// tcp://host:port, the replica taken from each topic).
	Publish string
	// Limits bound what is forwarded (DefaultLimits' MaxPayload when zero).
	Limits Limits
	// HWM bounds the messages queued for the subscribers (100,000 when zero); beyond it new
	// messages are dropped and the subscribers see a sequence gap.
	HWM int
}

// Forwarder binds one endpoint that replicas dial and re-publishes every message unchanged
// (topic, sequence number, payload) on a PUB socket that any number of routers dial: the
// routers then see each replica's own stream, sequence numbers included, as if they had
// dialed the replica. It is ZMQ's XSUB/XPUB proxy for this one protocol, with the frames
// checked: a message of other than three frames, a sequence frame of other than 8 bytes, a
// topic that is not kv@<pod>@<model>, or a payload over the limit is dropped and counted.
type Forwarder struct {
	sub, pub  zmq4.Socket
	lim       Limits
	forwarded atomic.Uint64
	dropped   atomic.Uint64
	closed    atomic.Bool
	// OnError, when set, hears receive errors and dropped messages.
	OnError func(error)
}

// NewForwarder binds both endpoints; a busy address is an error. The sockets close when ctx
// ends or on Close.
func NewForwarder(ctx context.Context, cfg ForwarderConfig) (*Forwarder, error) {
	if cfg.Listen == "" || cfg.Publish == "" {
		return nil, errors.New("kvevents: forwarder: want both a listen and a publish endpoint")
	}
	if cfg.Limits.MaxPayload <= 0 {
		cfg.Limits.MaxPayload = DefaultLimits().MaxPayload
	}
	if cfg.HWM <= 0 {
		cfg.HWM = 100_000
	}
	f := &Forwarder{lim: cfg.Limits, sub: zmq4.NewSub(ctx), pub: zmq4.NewPub(ctx)}
	if err := f.sub.Listen(ListenAddr(cfg.Listen)); err != nil {
		f.Close()
		return nil, fmt.Errorf("kvevents: forwarder: listen %s: %w", cfg.Listen, err)
	}
	if err := f.sub.SetOption(zmq4.OptionSubscribe, "kv@"); err != nil {
		f.Close()
		return nil, fmt.Errorf("kvevents: forwarder: %w", err)
	}
	if err := f.pub.Listen(ListenAddr(cfg.Publish)); err != nil {
		f.Close()
		return nil, fmt.Errorf("kvevents: forwarder: publish %s: %w", cfg.Publish, err)
	}
	if err := f.pub.SetOption(zmq4.OptionHWM, cfg.HWM); err != nil {
		f.Close()
		return nil, fmt.Errorf("kvevents: forwarder: %w", err)
	}
	return f, nil
}

// Run forwards messages until ctx is done or the forwarder is closed.
func (f *Forwarder) Run(ctx context.Context) {
	for {
		msg, err := f.sub.Recv()
		if ctx.Err() != nil || f.closed.Load() {
			return
		}
		if err != nil { // one dialing replica went away; the listener keeps the others
			f.report(fmt.Errorf("kvevents: forwarder: receive: %w", err))
			continue
		}
		if err := f.check(msg.Frames); err != nil {
			f.dropped.Add(1)
			f.report(err)
			continue
		}
		if err := f.pub.Send(msg); err != nil {
			f.dropped.Add(1)
			f.report(fmt.Errorf("kvevents: forwarder: send: %w", err))
			continue
		}
		f.forwarded.Add(1)
	}
}

func (f *Forwarder) check(frames [][]byte) error {
	switch {
	case len(frames) != 3 || len(frames[1]) != 8:
		return fmt.Errorf("kvevents: forwarder: message of %d frames, want topic, 8-byte seq, payload", len(frames))
	case len(frames[2]) > f.lim.MaxPayload:
		return fmt.Errorf("kvevents: forwarder: payload of %d bytes (limit %d)", len(frames[2]), f.lim.MaxPayload)
	}
	if _, _, ok := ParseTopic(string(frames[0])); !ok {
		return fmt.Errorf("kvevents: forwarder: topic %q is not kv@<pod>@<model>", frames[0])
	}
	return nil
}

func (f *Forwarder) report(err error) {
	if f.OnError != nil {
		f.OnError(err)
	}
}

// Forwarded and Dropped count the messages re-published and those dropped.
func (f *Forwarder) Forwarded() uint64 { return f.forwarded.Load() }

// Dropped counts the messages dropped (malformed, over the limit, or not sent).
func (f *Forwarder) Dropped() uint64 { return f.dropped.Load() }

// Close closes both sockets.
func (f *Forwarder) Close() error {
	f.closed.Store(true)
	return errors.Join(f.sub.Close(), f.pub.Close())
}

// ListenAddr is endpoint as a socket binds it: vLLM's "tcp://*:5557" means every interface.
func ListenAddr(endpoint string) string { return strings.Replace(endpoint, "*", "0.0.0.0", 1) }

// DialAddr is how a process on the same host dials a bound endpoint: an "every interface"
// host (*, 0.0.0.0, [::]) becomes the loopback address.
func DialAddr(endpoint string) string {
	for _, host := range []string{"tcp://*:", "tcp://0.0.0.0:", "tcp://[::]:"} {
		if port, ok := strings.CutPrefix(endpoint, host); ok {
			return "tcp://127.0.0.1:" + port
		}
	}
	return endpoint
}
