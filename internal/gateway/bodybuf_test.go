package gateway

import (
	"io"
	"testing"
)

// The buffer goes back to the pool only when the call and every attempt's reader are done,
// whatever order they finish in and however often a transport closes a body.
func TestBodyBufHeldUntilLastReader(t *testing.T) {
	b := newBodyBuf()
	*b.buf = append(*b.buf, "the body"...)
	first, second := b.reader(), b.reader()
	b.release() // the handler returned; both attempts' transports still hold the body
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	_ = first.Close() // a second Close must not give up another hold
	if b.buf == nil {
		t.Fatal("buffer released while an attempt still reads it")
	}
	got, err := io.ReadAll(second)
	if err != nil || string(got) != "the body" {
		t.Fatalf("read %q, %v", got, err)
	}
	_ = second.Close()
	if b.buf != nil {
		t.Fatal("buffer not released after the last reader closed")
	}
}
