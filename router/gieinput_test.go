package router

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// gieInput produces exactly the first limit bytes of json.Marshal of the messages, whatever
// the contents (multi-byte runes cut at the limit, characters Go's HTML escaping lengthens,
// invalid UTF-8) and wherever the limit falls.
func TestGIEInputIsMarshalPrefix(t *testing.T) {
	pieces := []string{"plain words ", "é", "日本", "🙂", "<b>", "&amp;", "\"q\"", "\n", "\\", "\x00", "\xff", "\u2028"}
	rng := rand.New(rand.NewPCG(3, 4))
	var scratch []byte
	for trial := range 300 {
		var msgs []Message
		for range 1 + rng.IntN(3) {
			var sb strings.Builder
			for range rng.IntN(60) {
				sb.WriteString(pieces[rng.IntN(len(pieces))])
			}
			msgs = append(msgs, Message{Role: []string{"system", "user", ""}[rng.IntN(3)], Content: sb.String()})
		}
		gm := make([]gieMessage, len(msgs))
		for i, m := range msgs {
			gm[i] = gieMessage{Role: m.Role, Content: m.Content}
		}
		full, err := json.Marshal(gm)
		if err != nil {
			t.Fatal(err)
		}
		limit := 1 + rng.IntN(len(full)+40)
		got, buf := gieInput(&Request{Messages: msgs}, scratch, limit)
		scratch = buf
		if want := string(full[:min(limit, len(full))]); got != want {
			t.Fatalf("trial %d, limit %d:\n got %q\nwant %q", trial, limit, got, want)
		}
	}
}
