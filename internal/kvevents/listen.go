package kvevents

import (
	"context"

	"github.com/go-zeromq/zmq4"
)

// Bound is a Source whose endpoint is bound: opened by Listen before it is read, so that a
// busy address is an error when the router starts rather than a log line while it runs.
type Bound struct {
	s    *Subscriber
	src  Source
	sock zmq4.Socket
}

// Listen binds src's endpoint (src.Bind is implied). The socket closes when ctx ends.
func (s *Subscriber) Listen(ctx context.Context, src Source) (*Bound, error) {
	src.Bind = true
	src.Endpoint = ListenAddr(src.Endpoint)
	sock, err := s.open(ctx, src)
	if err != nil {
		return nil, err
	}
	return &Bound{s: s, src: src, sock: sock}, nil
}

// Run reads the bound endpoint until ctx is done, then closes it. A replica that goes away
// leaves the others connected.
func (b *Bound) Run(ctx context.Context) {
	defer b.sock.Close()
	_ = b.s.read(ctx, b.src, b.sock)
}

// Close closes the socket of a Bound that will not be Run.
func (b *Bound) Close() error { return b.sock.Close() }
