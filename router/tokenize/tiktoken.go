package tokenize

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// encodingName is the BPE AIBrix's tiktoken tokenizer uses.
const encodingName = "cl100k_base"

// encoder builds the cl100k_base encoder once per process, from the ranks
// embedded by the offline loader. It is written once and read-only after.
var encoder = sync.OnceValues(func() (*tiktoken.Tiktoken, error) {
	tiktoken.SetBpeLoader(tiktoken_loader.NewOfflineLoader())
	enc, err := tiktoken.GetEncoding(encodingName)
	if err != nil {
		return nil, fmt.Errorf("tokenize: loading %s: %w", encodingName, err)
	}
	return enc, nil
})

// Tiktoken is the cl100k_base BPE tokenizer. All values share one encoder.
type Tiktoken struct {
	enc *tiktoken.Tiktoken
}

var _ Tokenizer = (*Tiktoken)(nil)

// NewTiktoken returns the cl100k_base tokenizer. The first call in a process
// builds the encoder from the embedded ranks (see the package comment);
// later calls are cheap.
func NewTiktoken() (*Tiktoken, error) {
	enc, err := encoder()
	if err != nil {
		return nil, err
	}
	return &Tiktoken{enc: enc}, nil
}

// Name returns NameTiktoken.
func (*Tiktoken) Name() string { return NameTiktoken }

// Encode returns the token ids of text. Special-token text such as
// "<|endoftext|>" is encoded as ordinary text, as AIBrix does.
func (t *Tiktoken) Encode(text string) []int {
	return t.enc.Encode(text, nil, nil)
}

// Count returns the number of tokens in text.
func (t *Tiktoken) Count(text string) int {
	return len(t.Encode(text))
}

// AppendBytes appends each token id of text as 4 big-endian bytes; it never
// fails.
func (t *Tiktoken) AppendBytes(dst []byte, text string) ([]byte, error) {
	ids := t.Encode(text)
	dst = slices.Grow(dst, TokenBytes*len(ids))
	for _, id := range ids {
		dst = binary.BigEndian.AppendUint32(dst, uint32(id))
	}
	return dst, nil
}
