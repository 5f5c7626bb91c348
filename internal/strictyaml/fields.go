package strictyaml

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Fields returns the first line of each field's dotted path in the document (or node) n,
// sequence elements as path[i], for errors that a caller's own checks report against the
// file (a Validate that names the line of a bad value).
func Fields(n *yaml.Node) map[string]int {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	out := map[string]int{}
	fields(n, "", out)
	return out
}

func fields(n *yaml.Node, path string, out map[string]int) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := n.Content[i].Value
			if path != "" {
				p = path + "." + p
			}
			if l, ok := out[p]; !ok || n.Content[i].Line < l {
				out[p] = n.Content[i].Line
			}
			fields(n.Content[i+1], p, out)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if l, ok := out[p]; !ok || c.Line < l {
				out[p] = c.Line
			}
			fields(c, p, out)
		}
	}
}
