package tokenize

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Tokenizer names accepted by New.
const (
	NameCharacter = "character"
	NameTiktoken  = "tiktoken"
)

// ErrUnknownTokenizer means New was given a name it does not know.
var ErrUnknownTokenizer = errors.New("tokenize: unknown tokenizer")

// Tokenizer turns a prompt into the byte stream that block hashing
// consumes. Implementations are safe for concurrent use.
type Tokenizer interface {
	// Name returns the name New accepts for this tokenizer.
	Name() string
	// AppendBytes appends the byte stream of text to dst and returns the
	// extended slice.
	AppendBytes(dst []byte, text string) ([]byte, error)
}

// New returns the tokenizer called name: NameCharacter or NameTiktoken.
// Only the first tiktoken tokenizer in a process is expensive to build.
func New(name string) (Tokenizer, error) {
	switch name {
	case NameCharacter:
		return Character{}, nil
	case NameTiktoken:
		return NewTiktoken()
	default:
		return nil, fmt.Errorf("%w %q (want %q or %q)", ErrUnknownTokenizer, name, NameCharacter, NameTiktoken)
	}
}

// Character is AIBrix's default tokenizer: the byte stream is the UTF-8 text
// itself, so a block of n bytes is n bytes of text.
type Character struct{}

var _ Tokenizer = Character{}

// Name returns NameCharacter.
func (Character) Name() string { return NameCharacter }

// AppendBytes appends text to dst; it never fails.
func (Character) AppendBytes(dst []byte, text string) ([]byte, error) {
	return append(dst, text...), nil
}

// TokenBytes is the number of bytes AppendTokenBytes emits per token.
const TokenBytes = 4

// AppendTokenBytes appends each token id as 4 big-endian bytes (AIBrix's
// IntToByteArray), for requests that already carry token ids.
func AppendTokenBytes(dst []byte, tokens []int32) []byte {
	dst = slices.Grow(dst, TokenBytes*len(tokens))
	for _, t := range tokens {
		dst = binary.BigEndian.AppendUint32(dst, uint32(t))
	}
	return dst
}
