package bloomguard

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// undocumented lists the exported identifiers of the package in dir that have no doc comment
// (a const or var in a documented group counts as documented, as go doc shows the group's).
func undocumented(t *testing.T, dir string) []string {
	t.Helper()
	fset := token.NewFileSet()
	notTest := func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }
	pkgs, err := parser.ParseDir(fset, dir, notTest, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Name.IsExported() && d.Doc == nil && (d.Recv == nil || exportedRecv(d.Recv)) {
						missing = append(missing, fset.Position(d.Pos()).String()+" "+d.Name.Name)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						switch s := s.(type) {
						case *ast.TypeSpec:
							if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
								missing = append(missing, fset.Position(s.Pos()).String()+" "+s.Name.Name)
							}
						case *ast.ValueSpec:
							for _, n := range s.Names {
								if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
									missing = append(missing, fset.Position(n.Pos()).String()+" "+n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	return missing
}

func exportedRecv(recv *ast.FieldList) bool {
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}

// TestEveryExportedIdentifierIsDocumented keeps the module pkg.go.dev-ready: go doc shows a
// sentence for every exported name. Its control: a planted package with one undocumented
// function is caught.
func TestEveryExportedIdentifierIsDocumented(t *testing.T) {
	if missing := undocumented(t, "."); len(missing) > 0 {
		t.Fatalf("exported without a doc comment:\n%s", strings.Join(missing, "\n"))
	}
	dir := t.TempDir()
	writeFile(t, dir+"/p.go", "package p\n\n// Documented is.\nfunc Documented() {}\n\nfunc Bare() {}\n")
	if got := undocumented(t, dir); len(got) != 1 || !strings.HasSuffix(got[0], " Bare") {
		t.Fatalf("the planted undocumented function was not caught: %v", got)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
