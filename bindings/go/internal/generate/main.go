// Command generate writes the Go files of package mcpgw that are derived from the project's one
// list of each thing, so that nothing is kept twice by hand:
//
//   - codes_gen.go: the result codes (Code constants), their sentinel errors (Err values) and the
//     table errors.Is uses, from the enum mcpgw_result of include/mcpgw.h (which cbindgen
//     generates from the Rust enum);
//   - mcpstate_gen.go: the states of a registered MCP (MCPState constants) and their
//     documentation, from the enum McpState of src/wire/rest.rs.
//
// Run it with `go generate` in bindings/go. Its test fails when a checked-in file is stale.
//
//	go run ./internal/generate -header ../../include/mcpgw.h -rest ../../src/wire/rest.rs -out .
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

func main() {
	header := flag.String("header", "../../include/mcpgw.h", "the C header")
	rest := flag.String("rest", "../../src/wire/rest.rs", "the Rust module with enum McpState")
	out := flag.String("out", ".", "the directory of package mcpgw")
	flag.Parse()
	files, err := generate(*header, *rest)
	if err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(*out, name), text, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "generate:", err)
			os.Exit(1)
		}
	}
}

// generate returns the generated files by name.
func generate(headerPath, restPath string) (map[string][]byte, error) {
	header, err := os.ReadFile(headerPath)
	if err != nil {
		return nil, err
	}
	rest, err := os.ReadFile(restPath)
	if err != nil {
		return nil, err
	}
	codes, err := parseResultCodes(string(header))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", headerPath, err)
	}
	states, err := parseMCPStates(string(rest))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", restPath, err)
	}
	codesGo, err := codesFile(codes)
	if err != nil {
		return nil, err
	}
	statesGo, err := statesFile(states)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{"codes_gen.go": codesGo, "mcpstate_gen.go": statesGo}, nil
}

// resultCode is one MCPGW_RESULT_* constant of the header.
type resultCode struct {
	name  string // after MCPGW_RESULT_, e.g. NOT_FOUND
	value int
	doc   string // its comment, one line
}

var enumMember = regexp.MustCompile(`^\s*MCPGW_RESULT_([A-Z0-9_]+)\s*=\s*([0-9]+),?\s*$`)

// parseResultCodes reads the members of `enum mcpgw_result` with the comment above each.
func parseResultCodes(header string) ([]resultCode, error) {
	start := strings.Index(header, "enum mcpgw_result\n")
	if start < 0 {
		return nil, fmt.Errorf("no `enum mcpgw_result`")
	}
	body := header[start:]
	open := strings.Index(body, "{")
	end := strings.Index(body, "};")
	if open < 0 || end < open {
		return nil, fmt.Errorf("`enum mcpgw_result` has no body")
	}
	var codes []resultCode
	var comment []string
	inComment := false
	for _, line := range strings.Split(body[open+1:end], "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "/*"):
			inComment, comment = true, nil
			t = strings.TrimSpace(strings.TrimPrefix(t, "/*"))
			if strings.HasSuffix(t, "*/") {
				inComment = false
				t = strings.TrimSpace(strings.TrimSuffix(t, "*/"))
			}
			if t != "" {
				comment = append(comment, t)
			}
		case inComment:
			if strings.HasSuffix(t, "*/") {
				inComment = false
				t = strings.TrimSpace(strings.TrimSuffix(t, "*/"))
			}
			if t != "" {
				comment = append(comment, t)
			}
		case t == "":
		default:
			m := enumMember.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("cannot read the enum member %q", t)
			}
			v, _ := strconv.Atoi(m[2])
			codes = append(codes, resultCode{name: m[1], value: v, doc: strings.Join(comment, " ")})
			comment = nil
		}
	}
	if len(codes) == 0 || codes[0].name != "OK" {
		return nil, fmt.Errorf("`enum mcpgw_result` does not start with MCPGW_RESULT_OK")
	}
	return codes, nil
}

// mcpState is one variant of the Rust enum McpState.
type mcpState struct {
	variant string // e.g. Connected
	doc     string
}

var rustVariant = regexp.MustCompile(`^\s*([A-Z][A-Za-z0-9]*),\s*$`)

// parseMCPStates reads the variants of `pub enum McpState` with their doc comments.
func parseMCPStates(rest string) ([]mcpState, error) {
	start := strings.Index(rest, "pub enum McpState {")
	if start < 0 {
		return nil, fmt.Errorf("no `pub enum McpState`")
	}
	if !strings.Contains(rest[:start], `#[serde(rename_all = "snake_case")]`) {
		return nil, fmt.Errorf("McpState is no longer renamed to snake_case")
	}
	body := rest[start+len("pub enum McpState {"):]
	body = body[:strings.Index(body, "}")]
	var states []mcpState
	var doc []string
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "///"):
			doc = append(doc, strings.TrimSpace(strings.TrimPrefix(t, "///")))
		case t == "":
		default:
			m := rustVariant.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("cannot read the McpState variant %q", t)
			}
			states = append(states, mcpState{variant: m[1], doc: strings.Join(doc, " ")})
			doc = nil
		}
	}
	if len(states) == 0 {
		return nil, fmt.Errorf("McpState has no variants")
	}
	return states, nil
}

// goName turns SCREAMING_SNAKE_CASE into a Go name, keeping Go's initialisms upper case.
func goName(screaming string) string {
	var b strings.Builder
	for _, word := range strings.Split(screaming, "_") {
		switch word {
		case "IO", "OK", "ID", "HTTP", "JSON", "URL", "ABI":
			b.WriteString(word)
		default:
			b.WriteString(word[:1] + strings.ToLower(word[1:]))
		}
	}
	return b.String()
}

// snake turns a Rust variant name into serde's snake_case.
func snake(variant string) string {
	var b strings.Builder
	for i, r := range variant {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// sentence makes a comment text end like a sentence.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s != "" && !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// comment is text as a tab-indented Go comment, wrapped at 100 columns.
func comment(text string) string {
	var b strings.Builder
	line := "\t//"
	for _, word := range strings.Fields(text) {
		if len(line)+1+len(word) > 96 && line != "\t//" {
			b.WriteString(line + "\n")
			line = "\t//"
		}
		line += " " + word
	}
	b.WriteString(line + "\n")
	return b.String()
}

const banner = "// Code generated by internal/generate from %s; DO NOT EDIT.\n" +
	"// Regenerate with `go generate` in bindings/go.\n\n"

func codesFile(codes []resultCode) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, banner, "include/mcpgw.h (enum mcpgw_result)")
	b.WriteString("package mcpgw\n\nimport \"errors\"\n\n")
	b.WriteString("// The result codes of libmcpgw, one for each MCPGW_RESULT_* of mcpgw.h.\nconst (\n")
	for _, c := range codes {
		b.WriteString(comment(fmt.Sprintf("Code%s is MCPGW_RESULT_%s: %s", goName(c.name), c.name, sentence(c.doc))))
		fmt.Fprintf(&b, "\tCode%s Code = %d\n", goName(c.name), c.value)
	}
	b.WriteString(")\n\n")
	b.WriteString("// The kinds of failure, one for each result code but CodeOK. Every error a Client returns is an\n" +
		"// *Error, which errors.Is matches with the value of its Code.\nvar (\n")
	for _, c := range codes[1:] {
		b.WriteString(comment(fmt.Sprintf("Err%s is the kind of an *Error with Code%s: %s", goName(c.name),
			goName(c.name), sentence(c.doc))))
		fmt.Fprintf(&b, "\tErr%s = errors.New(%q)\n", goName(c.name),
			"mcpgw: "+strings.ToLower(strings.ReplaceAll(c.name, "_", " ")))
	}
	b.WriteString(")\n\n")
	b.WriteString("// kinds maps each result code to the error value errors.Is matches it with.\nvar kinds = map[Code]error{\n")
	for _, c := range codes[1:] {
		fmt.Fprintf(&b, "\tCode%s: Err%s,\n", goName(c.name), goName(c.name))
	}
	b.WriteString("}\n\n")
	b.WriteString("// codeNames holds each code's name after MCPGW_RESULT_, as mcpgw_result_name gives it.\nvar codeNames = map[Code]string{\n")
	for _, c := range codes {
		fmt.Fprintf(&b, "\tCode%s: %q,\n", goName(c.name), c.name)
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

func statesFile(states []mcpState) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, banner, "src/wire/rest.rs (enum McpState)")
	b.WriteString("package mcpgw\n\n")
	b.WriteString("// The states of a registered MCP, as MCPStatus.State gives them.\nconst (\n")
	for _, s := range states {
		b.WriteString(comment(fmt.Sprintf("MCPState%s (%q): %s", s.variant, snake(s.variant), sentence(s.doc))))
		fmt.Fprintf(&b, "\tMCPState%s MCPState = %q\n", s.variant, snake(s.variant))
	}
	b.WriteString(")\n\n// mcpStates lists every state, in the gateway's order.\nvar mcpStates = []MCPState{\n")
	for _, s := range states {
		fmt.Fprintf(&b, "\tMCPState%s,\n", s.variant)
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}
