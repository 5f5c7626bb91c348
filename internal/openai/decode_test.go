package openai

import "testing"

// TestKnownKey checks the interning table: every key it holds is found, others are not, and a
// lookup does not allocate.
func TestKnownKey(t *testing.T) {
	n := 0
	for _, slot := range knownKeys {
		for _, k := range slot {
			n++
			if got, ok := knownKey([]byte(k)); !ok || got != k {
				t.Errorf("knownKey(%q) = %q, %v", k, got, ok)
			}
			if _, ok := knownKey([]byte(k + "_")); ok {
				t.Errorf("knownKey(%q) found", k+"_")
			}
		}
	}
	if n < 50 {
		t.Fatalf("table holds %d keys", n)
	}
	for _, k := range []string{"", "x", "Model", "usage ", "cached_token"} {
		if got, ok := knownKey([]byte(k)); ok {
			t.Errorf("knownKey(%q) = %q, true", k, got)
		}
	}
	b := []byte("prompt_tokens_details")
	if a := testing.AllocsPerRun(100, func() { _, _ = knownKey(b) }); a != 0 {
		t.Errorf("knownKey allocates %v times", a)
	}
}
