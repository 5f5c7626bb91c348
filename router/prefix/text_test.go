package prefix

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCommonPrefixLen(t *testing.T) {
	long := strings.Repeat("0123456789", 1000)
	tests := []struct {
		name string
		a, b string
		want int
	}{
		{name: "both empty", want: 0},
		{name: "one empty", a: "abc", want: 0},
		{name: "equal", a: "abc", b: "abc", want: 3},
		{name: "prefix", a: "ab", b: "abc", want: 2},
		{name: "differ first", a: "xbc", b: "abc", want: 0},
		{name: "differ middle", a: "abXd", b: "abYd", want: 2},
		{name: "long equal", a: long, b: long, want: len(long)},
		{name: "long differ late", a: long + "a", b: long + "b", want: len(long)},
		{name: "long differ early", a: "x" + long, b: "y" + long, want: 0},
		{name: "long differ at 4097", a: long[:4097] + "!" + long, b: long, want: 4097},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := commonPrefixLen(tc.a, tc.b); got != tc.want {
				t.Errorf("commonPrefixLen = %d, want %d", got, tc.want)
			}
			if got := commonPrefixLen(tc.b, tc.a); got != tc.want {
				t.Errorf("commonPrefixLen swapped = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRuneBoundary(t *testing.T) {
	tests := []struct {
		name string
		text string
		m    int
		want int
	}{
		{name: "ascii", text: "abc", m: 2, want: 2},
		{name: "zero", text: "\u00e9", m: 0, want: 0},
		{name: "end of text", text: "a\u00e9", m: 3, want: 3},
		{name: "inside two-byte rune", text: "a\u00e9b", m: 2, want: 1},
		{name: "after two-byte rune", text: "a\u00e9b", m: 3, want: 3},
		{name: "inside four-byte rune", text: "a\U0001F600", m: 4, want: 1},
		{name: "stray continuation byte", text: "a\x80\x80", m: 2, want: 2},
		{name: "truncated sequence", text: "\xf0\x9f\x98a", m: 2, want: 2},
		{name: "beyond text", text: "ab", m: 5, want: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := runeBoundary(tc.text, tc.m); got != tc.want {
				t.Errorf("runeBoundary(%q, %d) = %d, want %d", tc.text, tc.m, got, tc.want)
			}
		})
	}
}

// FuzzCommonPrefixLen compares the bisecting implementation with a byte loop.
func FuzzCommonPrefixLen(f *testing.F) {
	f.Add("hello world", "hello there")
	f.Add(strings.Repeat("a", 100), strings.Repeat("a", 99)+"b")
	f.Fuzz(func(t *testing.T, a, b string) {
		want := 0
		for want < len(a) && want < len(b) && a[want] == b[want] {
			want++
		}
		if got := commonPrefixLen(a, b); got != want {
			t.Fatalf("commonPrefixLen(%q, %q) = %d, want %d", a, b, got, want)
		}
	})
}

// CharCount counts as utf8.RuneCountInString does on valid UTF-8.
func TestCharCount(t *testing.T) {
	for _, s := range []string{"", "a", "héllo wörld", "日本語のテキスト", "emoji 😀 and ✓", strings.Repeat("é", 33) + "x"} {
		if got, want := CharCount(s), utf8.RuneCountInString(s); got != want {
			t.Errorf("CharCount(%q) = %d, want %d", s, got, want)
		}
	}
}

func FuzzCharCount(f *testing.F) {
	f.Add("héllo wörld, 日本語 😀")
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		if got, want := CharCount(s), utf8.RuneCountInString(s); got != want {
			t.Fatalf("CharCount(%q) = %d, want %d", s, got, want)
		}
	})
}
