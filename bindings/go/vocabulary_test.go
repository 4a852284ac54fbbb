package mcpgw_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's vocabulary table names what this package exports: every Go name in it exists (a
// method of *Client, or a package-level function), and every operation libmcpgw's host driver
// takes (OP_NAMES in src/driver/config.rs, in a checkout) has a row.
func TestVocabularyTable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := vocabulary(t, string(readme))
	funcs, methods := exported(t)
	for word, name := range rows {
		if m, ok := strings.CutPrefix(name, "Client."); ok {
			if !methods[m] {
				t.Errorf("the table's %s is %s, which *Client does not have", word, name)
			}
		} else if !funcs[name] {
			t.Errorf("the table's %s is %s, which the package does not export", word, name)
		}
	}
	if _, err := os.Stat(filepath.Join(repoRoot, "Cargo.toml")); err != nil {
		t.Skipf("SKIPPED: not in a checkout of the repository (%v)", err)
	}
	config, err := os.ReadFile(filepath.Join(repoRoot, "src", "driver", "config.rs"))
	if err != nil {
		t.Fatalf("the library's operations cannot be read: %v", err)
	}
	start := strings.Index(string(config), "pub const OP_NAMES")
	if start < 0 {
		t.Fatal("src/driver/config.rs has no OP_NAMES")
	}
	body := string(config[start:])
	body = body[:strings.Index(body, "];")]
	ops := regexp.MustCompile(`"([a-z_]+)"`).FindAllStringSubmatch(body, -1)
	if len(ops) < 12 {
		t.Fatalf("OP_NAMES reads as %v", ops)
	}
	for _, op := range ops {
		if _, ok := rows[op[1]]; !ok {
			t.Errorf("the operation %s has no row in the vocabulary table", op[1])
		}
	}
}

// vocabulary reads the rows of the table under "## Vocabulary": word -> Go name.
func vocabulary(t *testing.T, readme string) map[string]string {
	_, section, ok := strings.Cut(readme, "\n## Vocabulary\n")
	if !ok {
		t.Fatal("README.md has no Vocabulary section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\| `([A-Za-z.]+)` \\|$")
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			rows[m[1]] = m[2]
		}
	}
	if len(rows) < 12 {
		t.Fatalf("the vocabulary table has %d rows", len(rows))
	}
	return rows
}

// exported lists the package's exported functions and the methods of *Client.
func exported(t *testing.T) (funcs, methods map[string]bool) {
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	funcs, methods = map[string]bool{}, map[string]bool{}
	for _, f := range pkgs["mcpgw"].Files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() {
				continue
			}
			if fn.Recv == nil {
				funcs[fn.Name.Name] = true
				continue
			}
			if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
				if id, ok := star.X.(*ast.Ident); ok && id.Name == "Client" {
					methods[fn.Name.Name] = true
				}
			}
		}
	}
	return funcs, methods
}
