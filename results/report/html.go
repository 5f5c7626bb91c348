package report

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// HTMLReportFile is report.md rendered as one self-contained HTML page.
const HTMLReportFile = "report.html"

// htmlStyle keeps wide tables readable and figures within the page.
const htmlStyle = `body{font-family:system-ui,sans-serif;max-width:1400px;margin:2em auto;padding:0 1em;line-height:1.45;color:#222}
table{border-collapse:collapse;font-size:.85em;margin:1em 0;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:.25em .5em;vertical-align:top}th{background:#f3f3f3;white-space:nowrap}
img{max-width:100%;height:auto}code{font-size:.85em;white-space:pre-wrap}
h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}`

// buildHTML renders report.md with goldmark (GitHub tables) into an HTML page whose figures
// are embedded as data: URIs, so the page opens from disk with nothing beside it.
func buildHTML(report []byte, figs []figure) ([]byte, error) {
	pairs := make([]string, 0, 2*len(figs))
	for _, f := range figs {
		pairs = append(pairs, "]("+f.path+")", "](data:image/png;base64,"+base64.StdEncoding.EncodeToString(f.png)+")")
	}
	src := strings.NewReplacer(pairs...).Replace(string(report))
	var body bytes.Buffer
	md := goldmark.New(goldmark.WithExtensions(extension.Table))
	if err := md.Convert([]byte(src), &body); err != nil {
		return nil, fmt.Errorf("results: report.html: %w", err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n<style>\n%s\n</style>\n</head>\n<body>\n",
		html.EscapeString("kvroute results"), htmlStyle)
	b.Write(body.Bytes())
	b.WriteString("</body>\n</html>\n")
	return b.Bytes(), nil
}
