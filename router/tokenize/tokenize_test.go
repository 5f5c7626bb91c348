package tokenize

import (
	"errors"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name    string
		wantErr error
	}{
		{name: NameCharacter},
		{name: NameTiktoken},
		{name: "", wantErr: ErrUnknownTokenizer},
		{name: "Character", wantErr: ErrUnknownTokenizer},
		{name: "remote", wantErr: ErrUnknownTokenizer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := New(tc.name)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("New(%q) error = %v, want %v", tc.name, err, tc.wantErr)
			}
			if err == nil && tok.Name() != tc.name {
				t.Errorf("Name() = %q, want %q", tok.Name(), tc.name)
			}
		})
	}
}

func TestNewTiktokenIsCheapAfterTheFirst(t *testing.T) {
	first, err := NewTiktoken()
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		tk, err := NewTiktoken()
		if err != nil || tk.enc != first.enc {
			t.Fatal("NewTiktoken did not reuse the cached encoder")
		}
	})
	if allocs > 1 {
		t.Errorf("NewTiktoken allocates %v times after the first call, want at most 1", allocs)
	}
}

func TestAppendBytes(t *testing.T) {
	tests := []struct {
		tokenizer string
		text      string
		want      []byte
	}{
		{tokenizer: NameCharacter, text: "", want: []byte{0xAA}},
		{tokenizer: NameCharacter, text: "hi", want: []byte{0xAA, 'h', 'i'}},
		{tokenizer: NameCharacter, text: "caf\u00e9", want: []byte{0xAA, 'c', 'a', 'f', 0xC3, 0xA9}},
		{tokenizer: NameTiktoken, text: "", want: []byte{0xAA}},
		// 15339 = 0x3BEB, 1917 = 0x077D.
		{tokenizer: NameTiktoken, text: "hello world", want: []byte{0xAA, 0, 0, 0x3B, 0xEB, 0, 0, 0x07, 0x7D}},
	}
	for _, tc := range tests {
		t.Run(tc.tokenizer+"/"+tc.text, func(t *testing.T) {
			tok, err := New(tc.tokenizer)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tok.AppendBytes([]byte{0xAA}, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("AppendBytes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAppendTokenBytes(t *testing.T) {
	tests := []struct {
		name   string
		tokens []int32
		want   []byte
	}{
		{name: "none", tokens: nil, want: []byte{9}},
		{name: "one", tokens: []int32{15339}, want: []byte{9, 0, 0, 0x3B, 0xEB}},
		{name: "big-endian order", tokens: []int32{0x01020304, 1}, want: []byte{9, 1, 2, 3, 4, 0, 0, 0, 1}},
		{name: "negative wraps as uint32", tokens: []int32{-1}, want: []byte{9, 0xFF, 0xFF, 0xFF, 0xFF}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, AppendTokenBytes([]byte{9}, tc.tokens)); diff != "" {
				t.Errorf("AppendTokenBytes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTiktokenMatchesAppendTokenBytes(t *testing.T) {
	tk, err := NewTiktoken()
	if err != nil {
		t.Fatal(err)
	}
	text := "The router hashes 4-byte token ids in blocks of 16 bytes."
	var ids []int32
	for _, id := range tk.Encode(text) {
		ids = append(ids, int32(id))
	}
	got, err := tk.AppendBytes(nil, text)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(AppendTokenBytes(nil, ids), got); diff != "" {
		t.Errorf("AppendBytes differs from AppendTokenBytes(Encode) (-want +got):\n%s", diff)
	}
}

func TestTiktokenConcurrentUse(t *testing.T) {
	tk, err := NewTiktoken()
	if err != nil {
		t.Fatal(err)
	}
	want := tk.Count("concurrent callers share one encoder")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if got := tk.Count("concurrent callers share one encoder"); got != want {
					t.Errorf("Count = %d, want %d", got, want)
				}
			}
		})
	}
	wg.Wait()
}

// FuzzAppendBytes checks that neither tokenizer panics, that the character
// stream is the text itself, and that tiktoken emits whole 4-byte tokens
// that decode back to valid UTF-8 input.
func FuzzAppendBytes(f *testing.F) {
	for _, s := range []string{"", "hello world", "caf\u00e9 \U0001F600", "<|endoftext|>", "\xff\xfe", "a\r\n\tb  c", "日本語"} {
		f.Add(s)
	}
	tk, err := NewTiktoken()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		chars, err := Character{}.AppendBytes(nil, text)
		if err != nil || string(chars) != text {
			t.Fatalf("character stream %q, %v; want the text", chars, err)
		}
		b, err := tk.AppendBytes(nil, text)
		if err != nil {
			t.Fatal(err)
		}
		ids := tk.Encode(text)
		if len(b) != TokenBytes*len(ids) {
			t.Fatalf("%d bytes for %d tokens", len(b), len(ids))
		}
		if utf8.ValidString(text) {
			if got := tk.enc.Decode(ids); got != text {
				t.Fatalf("Decode(Encode(%q)) = %q", text, got)
			}
		}
	})
}
