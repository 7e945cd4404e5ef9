// Package doclinks checks that the repository explains itself: every
// relative link in its Markdown files and every docs/ reference in a Go
// comment names a file that exists and, with a #fragment, a heading of that
// file (GitHub's anchor for it); and no Go comment cites a document that is
// not in the repository, or a numbered section of one instead of its anchor.
package doclinks

import (
	"bufio"
	"bytes"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	// mdLink is an inline Markdown link or image: [text](target).
	mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// inlineCode is a code span, whose text is not Markdown.
	inlineCode = regexp.MustCompile("`[^`]*`")
	// heading is an ATX heading.
	heading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	// htmlID is an explicit anchor, <a id="x"> or name="x".
	htmlID = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// goDocRef is a reference to a document of docs/ in Go source.
	goDocRef = regexp.MustCompile(`docs/([A-Za-z0-9_.-]+\.md)(#[A-Za-z0-9_-]+)?`)
	// linkText drops a link's target from heading text: [text](url) → text.
	linkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	// outsideDoc names a design document of the team's that is not in this
	// repository (a reader of a clone cannot open it).
	outsideDoc = regexp.MustCompile(`\b(CONTRACT|UPSTREAM|DESIGN|STYLE|HARNESSES)(\.md|'s)?\b`)
	// section is a section sign, and rfcSection the one allowed use of it: a
	// section of an RFC, which is public and stable.
	section    = regexp.MustCompile(`§`)
	rfcSection = regexp.MustCompile(`RFC \d+ §`)
)

// root returns the module root (the directory holding go.mod).
func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// slug is GitHub's anchor of a heading: lower case, letters, digits, marks,
// '-' and '_' kept, spaces turned into '-', everything else dropped.
func slug(text string) string {
	text = linkText.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// doc is what one Markdown file offers and asks for.
type doc struct {
	anchors map[string]bool
	// links are the link targets outside code, with their line numbers.
	links []link
	// fromRoot is set for a file written to be included in the top-level
	// README (its first line says so): its links are relative to the
	// repository root.
	fromRoot bool
}

// rootRelative is what the first line of such a file says.
const rootRelative = "links are relative to the repository root"

type link struct {
	line   int
	target string
}

// parse reads a Markdown file: headings and explicit anchors, and links,
// skipping fenced code blocks and code spans.
func parse(b []byte) doc {
	d := doc{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if n == 1 && strings.HasPrefix(line, "<!--") && strings.Contains(line, rootRelative) {
			d.fromRoot = true
		}
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			s := slug(m[2])
			if k := seen[s]; k > 0 {
				d.anchors[fmt.Sprintf("%s-%d", s, k)] = true
			} else {
				d.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			d.links = append(d.links, link{line: n, target: m[1]})
		}
	}
	return d
}

// repo holds every Markdown file of the repository, by slash path.
type repo struct {
	root string
	docs map[string]doc
}

func load(t *testing.T) *repo {
	t.Helper()
	r := &repo{root: root(t), docs: map[string]doc{}}
	err := filepath.WalkDir(r.root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == ".git" || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".md") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.root, path)
		r.docs[filepath.ToSlash(rel)] = parse(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// resolve checks target (a path relative to the repository root, with an
// optional #fragment) and returns what is wrong, "" when nothing.
func (r *repo) resolve(target string) string {
	path, frag, _ := strings.Cut(target, "#")
	path = strings.TrimSuffix(path, "/")
	if _, err := os.Stat(filepath.Join(r.root, filepath.FromSlash(path))); err != nil {
		return fmt.Sprintf("%s does not exist", path)
	}
	if frag == "" {
		return ""
	}
	d, ok := r.docs[path]
	if !ok {
		return fmt.Sprintf("%s is not a Markdown file, so #%s names nothing", path, frag)
	}
	if !d.anchors[frag] {
		return fmt.Sprintf("%s has no heading with anchor #%s", path, frag)
	}
	return ""
}

func TestMarkdownLinksResolve(t *testing.T) {
	r := load(t)
	if _, ok := r.docs["docs/README.md"]; !ok {
		t.Fatal("docs/README.md, the index of the documentation, is missing")
	}
	for name, d := range r.docs {
		for _, l := range d.links {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			base := filepath.Dir(name)
			if d.fromRoot {
				base = "."
			}
			if strings.HasPrefix(target, "#") {
				target = name + target
			} else {
				target = filepath.ToSlash(filepath.Join(base, target))
				if strings.HasSuffix(l.target, "/") {
					target += "/"
				}
			}
			if why := r.resolve(target); why != "" {
				t.Errorf("%s:%d: link %s: %s", name, l.line, l.target, why)
			}
		}
	}
}

func TestGoCommentsCiteDocsThatExist(t *testing.T) {
	r := load(t)
	err := filepath.WalkDir(r.root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && e.Name() == ".git" {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r.root, path)
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "docs/") {
				continue
			}
			for _, m := range goDocRef.FindAllStringSubmatch(line, -1) {
				if why := r.resolve("docs/" + m[1] + m[2]); why != "" {
					t.Errorf("%s:%d: %s: %s", filepath.ToSlash(rel), i+1, m[0], why)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGoCommentsCiteOnlyThisRepository: a comment that cites a document
// cites a file of this repository (docs/<file>.md#<anchor>, which
// TestGoCommentsCiteDocsThatExist resolves), never the team's design
// documents outside it, and never a section number, which no test can
// check against its document.
func TestGoCommentsCiteOnlyThisRepository(t *testing.T) {
	r := load(t)
	for _, bad := range goCommentCitations(t, r.root) {
		t.Error(bad)
	}
}

// goCommentCitations walks the Go files under root and returns one line per
// comment line that cites what TestGoCommentsCiteOnlyThisRepository
// forbids.
func goCommentCitations(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && (e.Name() == ".git" || e.Name() == "testdata" || e.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		out = append(out, commentCitations(t, path, filepath.ToSlash(rel))...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// commentCitations parses one Go file and returns its forbidden citations,
// named by rel.
func commentCitations(t *testing.T, path, rel string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("parse %s: %v", rel, err)
	}
	var out []string
	for _, g := range f.Comments {
		for _, c := range g.List {
			line := fset.Position(c.Slash).Line
			for i, text := range strings.Split(c.Text, "\n") {
				for _, m := range outsideDoc.FindAllString(text, -1) {
					out = append(out, fmt.Sprintf("%s:%d: cites %s, a document outside this repository: cite docs/… or say what you mean", rel, line+i, m))
				}
				if n := len(section.FindAllString(text, -1)) - len(rfcSection.FindAllString(text, -1)); n > 0 {
					out = append(out, fmt.Sprintf("%s:%d: cites a section (§): cite docs/<file>.md#<anchor>, which the tests resolve", rel, line+i))
				}
			}
		}
	}
	return out
}

func TestCommentCitationsAreFound(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.go")
	src := `// Package x is as CONTRACT §2 says (see UPSTREAM
// §3.1 and DESIGN.md).
package x

// base64url (RFC 4648 §5) is fine; docs/protocol.md#2-the-session-log-stream too.
var s = "UPSTREAM § in a string is not a comment"

/* the §6.6 examples */
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := commentCitations(t, path, "x.go")
	want := []string{
		"x.go:1: cites CONTRACT, a document outside this repository: cite docs/… or say what you mean",
		"x.go:1: cites UPSTREAM, a document outside this repository: cite docs/… or say what you mean",
		"x.go:1: cites a section (§): cite docs/<file>.md#<anchor>, which the tests resolve",
		"x.go:2: cites DESIGN.md, a document outside this repository: cite docs/… or say what you mean",
		"x.go:2: cites a section (§): cite docs/<file>.md#<anchor>, which the tests resolve",
		"x.go:8: cites a section (§): cite docs/<file>.md#<anchor>, which the tests resolve",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSlugIsGitHubs(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"1. Session ids, subject tokens, workspace keys", "1-session-ids-subject-tokens-workspace-keys"},
		{"5.5 Publishing and the projector's rule", "55-publishing-and-the-projectors-rule"},
		{"session_search", "session_search"},
		{"Chinese, Japanese and Korean", "chinese-japanese-and-korean"},
		{"`DSH_HOME`", "dsh_home"},
		{"Collection, caps and timeouts", "collection-caps-and-timeouts"},
		{"See [search](search.md)", "see-search"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}
