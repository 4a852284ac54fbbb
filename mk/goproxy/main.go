// Command goproxy adds one version of a Go module to a module proxy directory, in the layout
// `go help goproxy` describes (MODULE/@v/list, VERSION.info, VERSION.mod, VERSION.zip), the zip
// made by golang.org/x/mod/zip, the Go tooling's own module zip code: what `go get` fetches
// through GOPROXY=file:///DIR, and what a module proxy serves.
//
//	go run . -module github.com/mcpgw/mcpgw/bindings/go -version v0.3.0 \
//	    -dir STAGED_MODULE -proxy DIR [-time 2026-12-01T20:00:00Z]
//
// The staged directory is the module's tree as released: its go.mod must name the module. A
// file the module zip format leaves out (a nested module, vendor/, a name it refuses) is an
// error, so nothing meant for the release goes missing unnoticed.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	modulePath := flag.String("module", "", "the module path")
	version := flag.String("version", "", "the version, e.g. v0.3.0")
	dir := flag.String("dir", "", "the staged module tree")
	proxy := flag.String("proxy", "", "the proxy directory to add the version to")
	stamp := flag.String("time", "", "the version's time, RFC 3339 (default: now)")
	flag.Parse()
	if err := run(*modulePath, *version, *dir, *proxy, *stamp); err != nil {
		fmt.Fprintln(os.Stderr, "goproxy:", err)
		os.Exit(1)
	}
}

func run(modulePath, version, dir, proxy, stamp string) error {
	if modulePath == "" || version == "" || dir == "" || proxy == "" {
		return errors.New("-module, -version, -dir and -proxy are required")
	}
	mv := module.Version{Path: modulePath, Version: version}
	if err := module.Check(mv.Path, mv.Version); err != nil {
		return err
	}
	when := time.Now().UTC()
	if stamp != "" {
		t, err := time.Parse(time.RFC3339, stamp)
		if err != nil {
			return fmt.Errorf("-time: %w", err)
		}
		when = t.UTC()
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	if got := modfile.ModulePath(gomod); got != modulePath {
		return fmt.Errorf("%s/go.mod names module %q, not %q", dir, got, modulePath)
	}
	files, err := zip.CheckDir(dir)
	if err != nil {
		return fmt.Errorf("the module zip would be invalid: %w", err)
	}
	if len(files.Omitted) > 0 {
		var names []string
		for _, f := range files.Omitted {
			names = append(names, f.Path+" ("+f.Err.Error()+")")
		}
		return fmt.Errorf("the module zip would leave out: %s", strings.Join(names, ", "))
	}

	escPath, err := module.EscapePath(modulePath)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	vdir := filepath.Join(proxy, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(vdir, escVersion)
	if err := writeFile(base+".zip", func(f *os.File) error { return zip.CreateFromDir(f, mv, dir) }); err != nil {
		return err
	}
	if err := writeFile(base+".mod", bytesWriter(gomod)); err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, when})
	if err != nil {
		return err
	}
	if err := writeFile(base+".info", bytesWriter(info)); err != nil {
		return err
	}
	versions, err := listed(filepath.Join(vdir, "list"))
	if err != nil {
		return err
	}
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	if err := writeFile(filepath.Join(vdir, "list"), bytesWriter([]byte(strings.Join(versions, "\n")+"\n"))); err != nil {
		return err
	}
	fmt.Printf("goproxy: %s@%s in %s (%d files)\n", modulePath, version, proxy, len(files.Valid))
	return nil
}

// listed reads a proxy's list file: one version a line; none when it does not exist yet.
func listed(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(data)), nil
}

func bytesWriter(data []byte) func(*os.File) error {
	return func(f *os.File) error {
		_, err := f.Write(data)
		return err
	}
}

// writeFile writes path through a temporary file renamed into place, so that a reader of the
// proxy never sees a partial file.
func writeFile(path string, write func(*os.File) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	err = errors.Join(write(f), f.Close(), os.Chmod(f.Name(), 0o644))
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
