package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"kvroute/results"
)

// hasStages reports whether any run has per-stage results.
func hasStages(runs []results.Run) bool {
	for i := range runs {
		if len(runs[i].Stages) > 0 {
			return true
		}
	}
	return false
}

// WriteStageTable writes, for the runs with stages, a terminal table of the mean over stages
// and each stage's TTFT p90 in seconds. It writes nothing when no run has stages.
func WriteStageTable(w io.Writer, runs []results.Run) error {
	if !hasStages(runs) {
		return nil
	}
	header := []any{"run", "stages", "ttft p90 s", "ttft mean s", "out tok/s", "hit"}
	for _, s := range stageColumns(runs) {
		header = append(header, s)
	}
	t := tablewriter.NewTable(w,
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: rightAfter(1, len(header))}))
	t.Header(header...)
	for _, r := range stageRows(runs, f2) {
		if err := t.Append(r...); err != nil {
			return fmt.Errorf("results: stage table: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("results: stage table: %w", err)
	}
	return nil
}

// writeStagesSection writes report.md's stage table (nothing when no run has stages).
func writeStagesSection(b *strings.Builder, runs []results.Run) {
	if !hasStages(runs) {
		return
	}
	cols := stageColumns(runs)
	b.WriteString("## Stages\n\nMean over the load stages (unweighted, warm-up stages left out), then each stage's " +
		"TTFT p90 in seconds; a stage holds the requests that arrived during it.\n\n" +
		"| run | stages | TTFT p90 (s) | TTFT mean (s) | out tok/s | hit rate |")
	for _, c := range cols {
		b.WriteString(" " + md(c) + " |")
	}
	b.WriteString("\n|---|---:|---:|---:|---:|---:|" + strings.Repeat("---:|", len(cols)) + "\n")
	for _, r := range stageRows(runs, f3) {
		b.WriteString("|")
		for i, v := range r {
			if i == 0 {
				v = md(v.(string))
			}
			fmt.Fprintf(b, " %v |", v)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// stageColumns names the stage columns after the first staged run's stages: "qps@index".
func stageColumns(runs []results.Run) []string {
	var cols []string
	for i := range runs {
		for _, s := range runs[i].Stages {
			c := fmt.Sprintf("%s@%d", loadKey(s.Rate), s.Index)
			if s.Warmup {
				c += " (warm-up)"
			}
			cols = append(cols, c)
		}
		if cols != nil {
			return cols
		}
	}
	return nil
}

// stageRows returns one row per staged run: name, mean over stages, and each stage's TTFT
// p90 in seconds, numbers formatted by f.
func stageRows(runs []results.Run, f func(float64) string) [][]any {
	var rows [][]any
	for i := range runs {
		r := &runs[i]
		if len(r.Stages) == 0 {
			continue
		}
		row := []any{r.Name, "0", "-", "-", "-", "-"}
		if m := r.StageMean; m != nil {
			row = []any{r.Name, fmt.Sprint(m.Stages), f(m.TTFT.P90 / 1000), f(m.TTFT.Mean / 1000), f1(m.OutputTokensPerS), f3(m.HitRate)}
		}
		for _, s := range r.Stages {
			row = append(row, f(s.Metrics.TTFT.P90/1000))
		}
		rows = append(rows, row)
	}
	return rows
}
