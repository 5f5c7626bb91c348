package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Decode decodes data, a single YAML document, into v strictly. An empty document leaves v
// as it is. A syntax error is returned as the YAML library words it (with its line); the
// problems of a well-formed document come back as one *FieldError each, joined.
func Decode(data []byte, v any) error {
	n, err := Parse(data)
	if err != nil || n == nil {
		return err
	}
	return DecodeNode(n, v)
}

// Parse parses data, a single YAML document, into its node tree, for a caller that rewrites
// nodes before DecodeNode; it returns nil for an empty document.
func Parse(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("line %d: a second document: want one YAML document", extra.Line)
	}
	return &doc, nil
}

// DecodeNode decodes the document (or mapping, or any node) n into v strictly, as Decode
// does. The lines in its errors are n's own, so a caller that edited a parsed file's nodes
// gets errors that point into the file.
func DecodeNode(n *yaml.Node, v any) error {
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil
		}
		n = n.Content[0]
	}
	// yaml.Node.Decode cannot reject unknown keys: encode the node and decode the text with
	// KnownFields, then map the text's lines back to n's.
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(n); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	var copied yaml.Node
	if err := yaml.Unmarshal(buf.Bytes(), &copied); err != nil || len(copied.Content) != 1 {
		return fmt.Errorf("strictyaml: the document does not survive encoding: %v", err)
	}
	places := map[int][]place{}
	mapLines(copied.Content[0], n, "", places)
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	err := dec.Decode(v)
	var te *yaml.TypeError
	if err == nil || !errors.As(err, &te) {
		return err
	}
	errs := make([]error, len(te.Errors))
	for i, msg := range te.Errors {
		errs[i] = locate(msg, places)
	}
	return errors.Join(errs...)
}

// FieldError is one problem of a decoded document: the line of the file and the dotted path
// of the field it is at ("" when the line holds no field, such as a top-level scalar), and
// what the YAML library says is wrong.
type FieldError struct {
	Line  int
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("line %d (field %s): %s", e.Line, e.Field, e.Msg)
}

// place is where a node of the encoded copy came from: its line in the original and its path.
type place struct {
	line int
	path string
}

// mapLines walks the encoded copy c and the original n, which have the same shape, and
// records for each line of c the places of the original whose nodes start there.
func mapLines(c, n *yaml.Node, path string, out map[int][]place) {
	out[c.Line] = append(out[c.Line], place{n.Line, path})
	if c.Kind != n.Kind || len(c.Content) != len(n.Content) {
		return // an alias, or something the encoder reshaped: keep the enclosing place
	}
	switch c.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(c.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			out[c.Content[i].Line] = append(out[c.Content[i].Line], place{n.Content[i].Line, p})
			mapLines(c.Content[i+1], n.Content[i+1], p, out)
		}
	case yaml.SequenceNode:
		for i := range c.Content {
			mapLines(c.Content[i], n.Content[i], fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

// locate turns one of the YAML library's "line N: MSG" messages about the encoded copy into a
// FieldError at the original's line. Of the places that start on line N (or, when none does,
// on the nearest line before) it takes the one the message names ("field NAME not found") or
// else the deepest.
func locate(msg string, places map[int][]place) error {
	var line int
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err != nil {
		return errors.New(msg)
	}
	text := strings.TrimSpace(msg[strings.IndexByte(msg, ':')+1:])
	cands := places[line]
	for l := line - 1; len(cands) == 0 && l > 0; l-- {
		cands = places[l] // no node starts on the line: the one enclosing it started before
	}
	if len(cands) == 0 {
		return &FieldError{Line: 1, Msg: text}
	}
	best := cands[len(cands)-1]
	if name, ok := unknownField(text); ok {
		for _, p := range cands {
			if p.path == name || strings.HasSuffix(p.path, "."+name) {
				best = p
			}
		}
	}
	return &FieldError{Line: best.line, Field: best.path, Msg: text}
}

// unknownField returns NAME from the library's "field NAME not found in type T".
func unknownField(text string) (string, bool) {
	rest, ok := strings.CutPrefix(text, "field ")
	if !ok {
		return "", false
	}
	name, _, ok := strings.Cut(rest, " not found in type ")
	return name, ok
}
