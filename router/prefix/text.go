package prefix

import "unicode/utf8"

// commonPrefixLen returns the length in bytes of the longest common prefix of
// a and b. It narrows a mismatch by bisection with string equality, which
// the runtime compares many bytes at a time, so long shared prefixes cost a
// few hundred nanoseconds rather than one step per byte.
func commonPrefixLen(a, b string) int {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	if a == b {
		return n
	}
	lo, hi := 0, n // a[:lo] == b[:lo] and a[:hi] != b[:hi]
	for hi-lo > 32 {
		mid := lo + (hi-lo)/2
		if a[lo:mid] == b[lo:mid] {
			lo = mid
		} else {
			hi = mid
		}
	}
	for lo < hi && a[lo] == b[lo] {
		lo++
	}
	return lo
}

// runeBoundary backs m off to the start of the rune of text that straddles
// byte offset m, if any, so that text[:m] never ends inside a multi-byte
// UTF-8 sequence. It moves at most utf8.UTFMax-1 bytes; offsets inside
// invalid UTF-8 (stray continuation bytes) stay where they are, since
// utf8.DecodeRuneInString treats each such byte as a rune of its own.
func runeBoundary(text string, m int) int {
	if m <= 0 || m >= len(text) || utf8.RuneStart(text[m]) {
		return m
	}
	for s := m - 1; s >= 0 && s >= m-(utf8.UTFMax-1); s-- {
		if utf8.RuneStart(text[s]) {
			if _, size := utf8.DecodeRuneInString(text[s:]); s+size > m {
				return s
			}
			return m
		}
	}
	return m
}
