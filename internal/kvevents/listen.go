package kvevents

import (
	"context"
	"fmt"

	"github.com/go-zeromq/zmq4"
)

// Stream is a Source whose socket is already open: bound by Listen, so that a busy address
// is an error when the router starts rather than a log line while it runs, or dialed by
// Dial, so that a router knows when its subscription is up (before it loads a snapshot).
type Stream struct {
	s    *Subscriber
	src  Source
	sock zmq4.Socket
}

// Listen binds src's endpoint (src.Bind is implied). The socket closes when ctx ends.
func (s *Subscriber) Listen(ctx context.Context, src Source) (*Stream, error) {
	src.Bind = true
	src.Endpoint = ListenAddr(src.Endpoint)
	sock, err := s.open(ctx, src)
	if err != nil {
		return nil, err
	}
	return &Stream{s: s, src: src, sock: sock}, nil
}

// Dial dials src's publisher once and subscribes (src.Bind is ignored). When it fails, Run
// the Source with Subscriber.Run instead, which redials.
func (s *Subscriber) Dial(ctx context.Context, src Source) (*Stream, error) {
	src.Bind = false
	sock, err := s.open(ctx, src)
	if err != nil {
		return nil, err
	}
	return &Stream{s: s, src: src, sock: sock}, nil
}

// Run reads the stream until ctx is done, then closes it. A bound stream keeps its other
// replicas when one goes away; a dialed one whose connection fails goes on as
// Subscriber.Run does, redialing.
func (st *Stream) Run(ctx context.Context) {
	err := st.s.read(ctx, st.src, st.sock)
	st.sock.Close()
	if ctx.Err() != nil || st.src.Bind {
		return
	}
	st.s.report(fmt.Errorf("kvevents: %s: %w; redialing", st.src.Endpoint, err))
	_ = st.s.Run(ctx, st.src)
}

// Close closes the socket of a Stream that will not be Run.
func (st *Stream) Close() error { return st.sock.Close() }
