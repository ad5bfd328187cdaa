package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// constant is one exported Go constant of the server package that clients mirror.
type constant struct {
	Name  string
	Value any // string or int
	Doc   string
}

// mirrored are the prefixes of the constants clients mirror.
var mirrored = []string{"Method", "Notify", "State", "Code", "Cmd"}

// readConsts parses the server package's non-test files for mirrored constants with literal
// values, in source order per file (files sorted by name).
func readConsts(dir string) ([]constant, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	files := map[string]*ast.File{}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", n, err)
		}
		if f.Name.Name != "server" {
			continue
		}
		files[n] = f
		names = append(names, n)
	}
	sort.Strings(names)
	var out []constant
	for _, name := range names {
		for _, decl := range files[name].Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, id := range vs.Names {
					if !isMirrored(id.Name) || i >= len(vs.Values) {
						continue
					}
					v, ok := literal(vs.Values[i])
					if !ok {
						continue
					}
					doc := strings.TrimSpace(vs.Comment.Text())
					out = append(out, constant{Name: id.Name, Value: v, Doc: doc})
				}
			}
		}
	}
	return out, nil
}

func isMirrored(name string) bool {
	for _, p := range mirrored {
		if strings.HasPrefix(name, p) && len(name) > len(p) && name[len(p)] >= 'A' && name[len(p)] <= 'Z' {
			return true
		}
	}
	return false
}

// literal reads a string or (possibly negative) integer literal.
func literal(e ast.Expr) (any, bool) {
	neg := false
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.SUB {
		neg, e = true, u.X
	}
	b, ok := e.(*ast.BasicLit)
	if !ok {
		return nil, false
	}
	switch b.Kind {
	case token.STRING:
		s, err := strconv.Unquote(b.Value)
		return s, err == nil && !neg
	case token.INT:
		n, err := strconv.Atoi(b.Value)
		if neg {
			n = -n
		}
		return n, err == nil
	}
	return nil, false
}
