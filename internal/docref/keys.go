package docref

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Row is one line of a reference table: a key (a dotted YAML path or a -flag), its type,
// its default value (empty when it is the zero value) and its description.
type Row struct {
	Key, Type, Default, Doc string
}

// Keys walks v, a struct value holding the defaults, and returns one row per YAML key in
// field order: nested structs add "key." to their fields' keys, lists of structs "key[].",
// maps of structs "key.<name>."; inline structs add nothing. A type with its own
// UnmarshalYAML or UnmarshalText is one key. Descriptions are the fields' doc comments, read
// from the source of the packages declaring them (src resolves a package path to its
// directory, see Sources).
func Keys(v any, src *Sources) ([]Row, error) {
	return KeysByTag(v, src, "yaml")
}

// KeysByTag is Keys with the keys read from the struct tag named tag ("yaml" or "json"):
// policy parameters, for one, are decoded by their json tags.
func KeysByTag(v any, src *Sources, tag string) ([]Row, error) {
	w := walker{src: src, tag: tag, open: map[reflect.Type]string{}}
	w.walk("", reflect.ValueOf(v))
	return w.rows, errors.Join(w.errs...)
}

type walker struct {
	src  *Sources
	tag  string // the struct tag that names keys
	rows []Row
	errs []error
	open map[reflect.Type]string // the structs being walked, by their key prefix
}

func (w *walker) walk(prefix string, v reflect.Value) {
	t := v.Type()
	if at, ok := w.open[t]; ok { // a struct inside itself: point at its keys
		where := "the top level"
		if at != "" {
			where = "`" + strings.TrimSuffix(at, ".") + "`"
		}
		w.rows[len(w.rows)-1].Type += " (the keys of " + where + ")"
		return
	}
	w.open[t] = prefix
	defer delete(w.open, t)
	for i := range t.NumField() {
		f := t.Field(i)
		name, inline, ok := tagKey(f, w.tag)
		if !ok {
			continue
		}
		fv := v.Field(i)
		if inline {
			w.walk(prefix, fv)
			continue
		}
		key := prefix + name
		comment, err := w.src.FieldDoc(t, f.Name)
		if err != nil {
			w.errs = append(w.errs, err)
		}
		w.rows = append(w.rows, Row{Key: key, Type: typeName(f.Type), Default: format(fv), Doc: comment})
		w.nested(key, fv)
	}
}

// nested descends into a key's struct, or the struct elements of its list or map.
func (w *walker) nested(key string, v reflect.Value) {
	t := v.Type()
	switch {
	case t.Kind() == reflect.Pointer && isStruct(t.Elem()):
		w.walk(key+".", reflect.New(t.Elem()).Elem())
	case isStruct(t):
		w.walk(key+".", v)
	case t.Kind() == reflect.Slice && isStruct(t.Elem()):
		w.walk(key+"[].", reflect.New(t.Elem()).Elem())
	case t.Kind() == reflect.Map && isStruct(t.Elem()):
		w.walk(key+".<name>.", reflect.New(t.Elem()).Elem())
	}
}

// tagKey returns the field's key under the struct tag named key ("yaml" or "json"), whether
// it is inlined, and whether it is a key at all.
func tagKey(f reflect.StructField, key string) (name string, inline, ok bool) {
	tag, hasTag := f.Tag.Lookup(key)
	if tag == "-" || !f.IsExported() && !strings.Contains(tag, "inline") {
		return "", false, false
	}
	parts := strings.Split(tag, ",")
	for _, p := range parts[1:] {
		if p == "inline" {
			return "", true, true
		}
	}
	if parts[0] != "" {
		return parts[0], false, true
	}
	if f.Anonymous && !hasTag {
		return "", true, true
	}
	return strings.ToLower(f.Name), false, true
}

var durationType = reflect.TypeFor[time.Duration]()

// isStruct reports whether t is a struct decoded key by key (not by its own unmarshaler).
func isStruct(t reflect.Type) bool {
	if t.Kind() != reflect.Struct || t == durationType {
		return false
	}
	p := reflect.PointerTo(t)
	_, y := p.MethodByName("UnmarshalYAML")
	_, x := p.MethodByName("UnmarshalText")
	_, j := p.MethodByName("UnmarshalJSON")
	return !y && !x && !j
}

// isDuration reports whether t is time.Duration or a named duration type of its own
// (router.Duration): an int64 called Duration.
func isDuration(t reflect.Type) bool {
	return t == durationType || t.Kind() == reflect.Int64 && t.Name() == "Duration"
}

// typeName names t as a configuration file spells it.
func typeName(t reflect.Type) string {
	switch {
	case isDuration(t):
		return "duration"
	case t.Kind() == reflect.Pointer:
		return typeName(t.Elem())
	case t.Kind() == reflect.Struct && !isStruct(t):
		return t.Name()
	case t.Kind() == reflect.Struct:
		return "object"
	case t.Kind() == reflect.Slice:
		return "list of " + typeName(t.Elem())
	case t.Kind() == reflect.Map:
		return "map of " + typeName(t.Elem())
	case strings.HasPrefix(t.Kind().String(), "int"), strings.HasPrefix(t.Kind().String(), "uint"):
		return "int"
	case strings.HasPrefix(t.Kind().String(), "float"):
		return "float"
	}
	return t.Kind().String()
}

// yamlMarshaler is yaml's Marshaler, declared here so as not to import a YAML library.
type yamlMarshaler interface{ MarshalYAML() (any, error) }

// format writes a default value, or "" for a zero value or an object.
func format(v reflect.Value) string {
	switch {
	case v.Kind() == reflect.Pointer && !v.IsNil():
		return format(v.Elem())
	case v.IsZero() || isStruct(v.Type()):
		return ""
	case v.Type().Implements(reflect.TypeFor[yamlMarshaler]()):
		if m, err := v.Interface().(yamlMarshaler).MarshalYAML(); err == nil {
			return fmt.Sprint(m)
		}
	case isDuration(v.Type()):
		return time.Duration(v.Int()).String()
	case v.Kind() == reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = format(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case v.Kind() == reflect.Map:
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, fmt.Sprint(k.Interface())+": "+format(v.MapIndex(k)))
		}
		sort.Strings(keys)
		return "{" + strings.Join(keys, ", ") + "}"
	}
	return fmt.Sprint(v.Interface())
}

// Flags returns one row per flag of fs, sorted by name; the type is the one flag.PrintDefaults
// shows (a back-quoted word in the usage names it).
func Flags(fs *flag.FlagSet) []Row {
	var rows []Row
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		if typ == "" {
			typ = "bool"
		}
		def := f.DefValue
		if def == "false" || def == "0" || def == "0s" {
			def = ""
		}
		rows = append(rows, Row{Key: "-" + f.Name, Type: typ, Default: def, Doc: usage})
	})
	return rows
}

// Sources reads doc comments from the source of the module's packages.
type Sources struct {
	root, module, mainDir string
	fields                map[string]string // "pkgpath.Type.Field" → doc
	parsed                map[string]bool
}

// NewSources finds the module from the working directory (a package directory, as in a
// test); the types of package main are read from mainDir.
func NewSources(mainDir string) (*Sources, error) {
	dir, err := filepath.Abs(".")
	if err != nil {
		return nil, err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			line, _, _ := bytes.Cut(data, []byte("\n"))
			module := strings.TrimSpace(strings.TrimPrefix(string(line), "module"))
			return &Sources{root: dir, module: module, mainDir: mainDir, fields: map[string]string{}, parsed: map[string]bool{}}, nil
		}
		if parent := filepath.Dir(dir); parent != dir {
			dir = parent
			continue
		}
		return nil, errors.New("docref: no go.mod above the working directory")
	}
}

// FieldDoc returns the doc comment of t's field, on one line.
func (s *Sources) FieldDoc(t reflect.Type, field string) (string, error) {
	pkg := t.PkgPath()
	if err := s.parse(pkg); err != nil {
		return "", err
	}
	return s.fields[pkg+"."+t.Name()+"."+field], nil
}

func (s *Sources) parse(pkg string) error {
	if s.parsed[pkg] {
		return nil
	}
	s.parsed[pkg] = true
	dir := s.mainDir
	if pkg != "main" {
		rel, ok := strings.CutPrefix(pkg, s.module)
		if !ok {
			return fmt.Errorf("docref: package %s is outside module %s", pkg, s.module)
		}
		dir = filepath.Join(s.root, rel)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("docref: %w", err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		if err != nil {
			return fmt.Errorf("docref: %w", err)
		}
		if strings.HasSuffix(f.Name.Name, "_test") { // an external test package's types
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				s.addFields(pkg, ts.Name.Name, st)
			}
			return false
		})
	}
	return nil
}

// addFields records the doc comments of st's fields. A field with no comment of its own
// takes the previous field's when that comment names it ("A and B weigh ..."), the way one
// comment documents a run of related fields.
func (s *Sources) addFields(pkg, typ string, st *ast.StructType) {
	prev := ""
	for _, f := range st.Fields.List {
		text := f.Doc.Text()
		if text == "" {
			text = f.Comment.Text()
		}
		text = strings.Join(strings.Fields(text), " ")
		if text == "" && len(f.Names) == 1 && strings.Contains(prev, f.Names[0].Name) {
			text = prev
		}
		prev = text
		names := f.Names
		if len(names) == 0 { // embedded: the type's name
			if id := embeddedName(f.Type); id != "" {
				names = []*ast.Ident{ast.NewIdent(id)}
			}
		}
		for _, n := range names {
			s.fields[pkg+"."+typ+"."+n.Name] = text
		}
	}
}

func embeddedName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return embeddedName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}
