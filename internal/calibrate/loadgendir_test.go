package calibrate

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const requestsCSV = `run,id,tenant,session,turn,prefix_group,endpoint,reason,status,error,arrival_ms,first_token_ms,finish_ms,prompt_tokens,cached_tokens,output_tokens,preemptions,retries,ttft_ms,tpot_ms,e2e_ms
a,r1,,r1,0,,e0,,completed,,120.5,150.5,200.5,300,0,6,0,0,30,10,80
a,r0,,r0,0,,e0,,completed,,100,140,190,400,0,5,0,0,40,12.5,90
b,r0,,r0,0,,e0,,completed,,0,20,30,100,0,2,0,0,20,10,30
a,r2,,r2,0,,e0,,failed,boom,130,0,131,10,0,0,0,0,0,0,1
`

func TestParseRequestsCSV(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * 1e6) }
	got, err := ParseRequestsCSV(strings.NewReader(requestsCSV), "requests.csv", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[0].Requests) != 2 || len(got[1].Requests) != 1 {
		t.Fatalf("got %d runs (%v), want a with 2 completed requests and b with 1", len(got), got)
	}
	want := Observed{Arrival: ms(20.5), PromptTokens: 300, OutputTokens: 6, TTFT: ms(30), E2E: ms(80)}
	if r := got[0].Requests[1]; r != want {
		t.Errorf("second request of a %+v, want %+v (sorted by arrival, from the first)", r, want)
	}
}

func TestParseRequestsCSVErrors(t *testing.T) {
	for _, tc := range []struct{ name, csv, want string }{
		{"missing column", "run,status,arrival_ms\n", "first_token_ms"},
		{"unknown run", strings.Replace(requestsCSV, "\nb,", "\nc,", 1), `run "c"`},
		{"bad number", strings.Replace(requestsCSV, "120.5", "x", 1), "arrival_ms"},
		{"token before arrival", strings.Replace(requestsCSV, "150.5", "100", 1), "want arrival < first token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRequestsCSV(strings.NewReader(tc.csv), "requests.csv", []string{"a", "b"})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "requests.csv") {
				t.Errorf("error %v, want one naming requests.csv and %q", err, tc.want)
			}
		})
	}
	_, err := ParseRequestsCSV(strings.NewReader("run,status\n"), "requests.csv", nil)
	if !errors.Is(err, ErrMissingField) {
		t.Errorf("missing columns: %v, want ErrMissingField", err)
	}
}
