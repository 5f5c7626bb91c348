package report

import (
	"fmt"
	"io"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"kvroute/results"
)

// WriteTable writes the key metrics of runs as a terminal table, one row per run in the
// given order: the configured rate (— where none was), completed requests per second of the
// arrival window, output tokens per second of the run; latencies in milliseconds.
func WriteTable(w io.Writer, runs []results.Run) error {
	header := []any{"run", "policy", "rate", "done", "req/s", "out tok/s", "ttft p50", "ttft p99",
		"tpot p50", "itl p99", "e2e p99", "hit", "jain", "preempt"}
	goodput := false
	for i := range runs {
		goodput = goodput || runs[i].Metrics.Goodput != nil
	}
	if goodput {
		header = append(header, "goodput")
	}
	t := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: rightAfter(2, len(header))}))
	t.Header(header...)
	for i := range runs {
		r := &runs[i]
		m := &r.Metrics
		rate := loadKey(r.RequestRate)
		if r.RateMeasured {
			rate = noRate
		}
		row := []any{r.Name, r.Policy, rate, fmt.Sprintf("%d/%d", m.Completed, m.Requests),
			f2(m.WindowThroughputRPS), f1(m.OutputTokensPerS), f1(m.TTFT.P50), f1(m.TTFT.P99),
			f2(m.TPOT.P50), f2(m.ITL.P99), f1(m.E2E.P99), f3(m.HitRate), f3(m.JainFairness), strconv.Itoa(m.Preemptions)}
		if goodput {
			g := "-"
			if m.Goodput != nil {
				g = fmt.Sprintf("%.2f/s %.0f%%", m.Goodput.RPS, 100*m.Goodput.Fraction)
			}
			row = append(row, g)
		}
		if err := t.Append(row...); err != nil {
			return fmt.Errorf("results: table: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("results: table: %w", err)
	}
	return nil
}

// rightAfter aligns the first k columns left and the rest of n right.
func rightAfter(k, n int) []tw.Align {
	a := make([]tw.Align, n)
	for i := range a {
		a[i] = tw.AlignRight
		if i < k {
			a[i] = tw.AlignLeft
		}
	}
	return a
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
