package server_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOpenAPISources: openapi_docs_gen.go holds the doc comments and enum
// values of the types the OpenAPI document describes, as the Go sources
// have them: the descriptions are the comments, the enums the constants
// of each named string type (or those a field's `enum:"..."` tag names).
// With -update it rewrites the file; `make openapi` runs it before
// rewriting api/openapi.json.
func TestOpenAPISources(t *testing.T) {
	c := startCluster(t, 1)
	root := filepath.Join("..", "..")
	x := &extractor{root: root, pkgs: map[string]*srcPkg{}, docs: map[string]string{}, typeEnums: map[string][]string{}, fieldEnums: map[string][]string{}}
	for _, key := range c.Servers[0].OpenAPITypes() {
		if err := x.typ(key); err != nil {
			t.Fatal(err)
		}
	}
	src, err := x.render()
	if err != nil {
		t.Fatal(err)
	}
	const gen = "openapi_docs_gen.go"
	if *update {
		if err := os.WriteFile(gen, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(gen)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, src) {
		t.Fatalf("%s is stale (a doc comment, constant or type changed): run `make openapi` and commit it", gen)
	}
}

type srcPkg struct {
	dir   string
	types map[string]*ast.TypeSpec
	tdoc  map[string]*ast.CommentGroup // a type's doc (its own or its lone decl's)
	vals  map[string]ast.Expr          // package-level const and var values
	ctype map[string]string            // const name -> its declared type name
	order []string                     // consts in source order
}

type extractor struct {
	root       string
	pkgs       map[string]*srcPkg
	docs       map[string]string
	typeEnums  map[string][]string
	fieldEnums map[string][]string
}

func (x *extractor) pkg(rel string) (*srcPkg, error) {
	if p, ok := x.pkgs[rel]; ok {
		return p, nil
	}
	dir := filepath.Join(x.root, filepath.FromSlash(rel))
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &srcPkg{dir: dir, types: map[string]*ast.TypeSpec{}, tdoc: map[string]*ast.CommentGroup{}, vals: map[string]ast.Expr{}, ctype: map[string]string{}}
	fset := token.NewFileSet()
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range gd.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					p.types[s.Name.Name] = s
					doc := s.Doc
					if doc == nil && len(gd.Specs) == 1 {
						doc = gd.Doc
					}
					p.tdoc[s.Name.Name] = doc
				case *ast.ValueSpec:
					for i, name := range s.Names {
						if i < len(s.Values) {
							p.vals[name.Name] = s.Values[i]
						}
						if gd.Tok == token.CONST {
							if id, ok := s.Type.(*ast.Ident); ok {
								p.ctype[name.Name] = id.Name
							}
							p.order = append(p.order, name.Name)
						}
					}
				}
			}
		}
	}
	x.pkgs[rel] = p
	return p, nil
}

// typ extracts the docs and enums of one "pkg/path.Type".
func (x *extractor) typ(key string) error {
	i := strings.LastIndex(key, ".")
	rel, name := key[:i], key[i+1:]
	p, err := x.pkg(rel)
	if err != nil {
		return err
	}
	ts, ok := p.types[name]
	if !ok {
		return fmt.Errorf("type %s not found in %s", name, p.dir)
	}
	if d := text(p.tdoc[name]); d != "" {
		x.docs[key] = d
	}
	switch tt := ts.Type.(type) {
	case *ast.Ident: // a named string type: its constants are its enum
		for _, c := range p.order {
			if p.ctype[c] != name {
				continue
			}
			v, err := x.value(rel, c)
			if err != nil {
				return err
			}
			x.typeEnums[key] = append(x.typeEnums[key], v...)
		}
	case *ast.StructType:
		prev := ""
		for _, f := range tt.Fields.List {
			if len(f.Names) == 0 {
				continue // embedded: its own type carries its docs
			}
			fk := key + "." + f.Names[0].Name
			d := text(f.Doc)
			if d == "" {
				d = text(f.Comment)
			}
			if d == "" && sharedDoc(prev, f.Names[0].Name) {
				d = prev // "CPUMilli and MemoryMiB are ..." documents both
			}
			prev = d
			if d != "" {
				x.docs[fk] = d
			}
			if f.Tag == nil {
				continue
			}
			tag, _ := strconv.Unquote(f.Tag.Value)
			names, ok := reflect.StructTag(tag).Lookup("enum")
			if !ok {
				continue
			}
			for _, n := range strings.Split(names, ",") {
				v, err := x.value(rel, strings.TrimSpace(n))
				if err != nil {
					return fmt.Errorf("%s: enum tag: %w", fk, err)
				}
				x.fieldEnums[fk] = append(x.fieldEnums[fk], v...)
			}
		}
	}
	return nil
}

// value resolves a constant (or a var listing constants) to its string
// values; "pkg.Name" looks in the internal package named pkg.
func (x *extractor) value(rel, name string) ([]string, error) {
	if q, n, ok := strings.Cut(name, "."); ok {
		var found []string
		_ = filepath.WalkDir(filepath.Join(x.root, "internal"), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && d.Name() == q {
				r, _ := filepath.Rel(x.root, path)
				found = append(found, filepath.ToSlash(r))
			}
			return nil
		})
		if len(found) != 1 {
			return nil, fmt.Errorf("package %s: %d candidates under internal/ %v", q, len(found), found)
		}
		rel, name = found[0], n
	}
	p, err := x.pkg(rel)
	if err != nil {
		return nil, err
	}
	e, ok := p.vals[name]
	if !ok {
		return nil, fmt.Errorf("%s.%s: no such constant or variable", rel, name)
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return []string{s}, err
		}
	case *ast.Ident:
		return x.value(rel, e.Name)
	case *ast.CompositeLit:
		var out []string
		for _, el := range e.Elts {
			id, ok := el.(*ast.Ident)
			if !ok {
				return nil, fmt.Errorf("%s.%s: element %T is not a constant", rel, name, el)
			}
			v, err := x.value(rel, id.Name)
			if err != nil {
				return nil, err
			}
			out = append(out, v...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s.%s: not a string constant or a list of them", rel, name)
}

// sharedDoc reports whether a field's doc comment is also about the next
// field, name: it is a subject of it ("A and Name are", "A is ...; Name
// its ...").
func sharedDoc(doc, name string) bool {
	return regexp.MustCompile(`(^|\band |; )` + regexp.QuoteMeta(name) + `\b`).MatchString(doc)
}

// text is a comment as one line.
func text(c *ast.CommentGroup) string {
	if c == nil {
		return ""
	}
	return strings.Join(strings.Fields(c.Text()), " ")
}

func (x *extractor) render() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by TestOpenAPISources -update; DO NOT EDIT.\n\npackage server\n\n")
	b.WriteString("// docs are the doc comments of the API's types and fields.\nvar docs = map[string]string{\n")
	for _, k := range sortedKeys(x.docs) {
		fmt.Fprintf(&b, "%q: %q,\n", k, x.docs[k])
	}
	b.WriteString("}\n\n// typeEnums are the constants of named string types.\nvar typeEnums = map[string][]string{\n")
	writeEnums(&b, x.typeEnums)
	b.WriteString("}\n\n// fieldEnums are the values of fields tagged enum:\"...\".\nvar fieldEnums = map[string][]string{\n")
	writeEnums(&b, x.fieldEnums)
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

func writeEnums(b *bytes.Buffer, m map[string][]string) {
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(b, "%q: {", k)
		for i, v := range m[k] {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(b, "%q", v)
		}
		b.WriteString("},\n")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
