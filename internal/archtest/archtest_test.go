package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/dshq/dshq"

// heavy are the libraries that open stores or run a server, by the import
// path prefix of their packages.
var heavy = map[string]string{
	"go.etcd.io/bbolt":               "bbolt",
	"github.com/blevesearch/":        "Bleve",
	"github.com/nats-io/nats-server": "nats-server",
}

// rules are the import rules of the tree.
// converters are the pure harness converters (capture/follow, which reads
// files and publishes through bus, is held to the SDK's rule instead).
var converters = []string{"capture", "capture/claudecode", "capture/codex", "capture/internal/build"}

var rules = []rule{
	{
		name:     "light-clients",
		why:      "the harness SDK, the query API's wire, the shards source, the tools, the MCP server, the query service and the harness file follower link neither bbolt, Bleve nor nats-server",
		packages: []string{"bus", "query", "shards", "tools", "tools/mcpserver", "cmd/query", "capture/follow"},
		forbid:   heavyLibrary,
	},
	{
		name:     "pure-vocabulary",
		why:      "the vocabulary and the pure cores link nothing but the standard library and the root vocabulary",
		packages: []string{".", "fold", "authz"},
		forbid: func(p pkg) string {
			if p.Standard || p.ImportPath == module {
				return ""
			}
			return short(p.ImportPath)
		},
	},
	{
		name:     "pure-converters",
		why:      "the harness capture converters are pure: they link no NATS, no store, and of ours only the vocabulary, fold, record and the converters",
		packages: converters,
		forbid: func(p pkg) string {
			if strings.HasPrefix(p.ImportPath, "github.com/nats-io/") {
				return "NATS (" + p.ImportPath + ")"
			}
			if what := heavyLibrary(p); what != "" {
				return what
			}
			if rel, ours := strings.CutPrefix(p.ImportPath, module+"/"); ours && rel != "fold" && rel != "record" && !slices.Contains(converters, rel) {
				return rel
			}
			return ""
		},
	},
	{
		name:     "pure-engine",
		why:      "the query engine and the query API's wire format link no bbolt, Bleve, nats.go or nats-server: every source is behind engine.Source",
		packages: []string{"engine", "query/wire"},
		forbid: func(p pkg) string {
			if strings.HasPrefix(p.ImportPath, "github.com/nats-io/") {
				return "NATS (" + p.ImportPath + ")"
			}
			return heavyLibrary(p)
		},
	},
	{
		name:     "no-io",
		why:      "the pure cores and the vocabulary do no I/O of their own",
		packages: []string{"fold", "authz", ".", "engine", "query/wire"},
		direct:   true,
		forbid: func(p pkg) string {
			if slices.Contains([]string{"os", "os/exec", "net", "net/http", "syscall", "io/ioutil"}, p.ImportPath) {
				return p.ImportPath
			}
			return ""
		},
	},
}

// ruleNamed returns the rule of the tree named name.
func ruleNamed(t *testing.T, name string) rule {
	t.Helper()
	for _, r := range rules {
		if r.name == name {
			return r
		}
	}
	t.Fatalf("no rule named %q", name)
	return rule{}
}

// heavyLibrary names the heavy library p belongs to ("" for none).
func heavyLibrary(p pkg) string {
	for prefix, name := range heavy {
		if strings.HasPrefix(p.ImportPath, prefix) {
			return name
		}
	}
	return ""
}

// rule forbids, in the dependencies of packages (module-relative; "." is
// the root), or only among their direct imports, the packages for which
// forbid names what they are ("" = allowed).
type rule struct {
	// name is how the self-test (TestCheck_NamesTheChain) finds a rule.
	name     string
	why      string
	packages []string
	direct   bool
	forbid   func(pkg) string
}

// pkg is what go list -json says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

// graph maps an import path to its package.
type graph map[string]pkg

func TestImportRules(t *testing.T) {
	var roots []string
	for i, r := range rules {
		pkgs, err := expand(r.packages)
		if err != nil {
			t.Fatal(err)
		}
		rules[i].packages = pkgs
		for _, p := range pkgs {
			roots = append(roots, abs(p))
		}
	}
	g, err := load(roots)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if len(r.packages) == 0 {
			t.Errorf("rule: %s; names no package", r.why)
		}
		if v := check(g, r); len(v) > 0 {
			t.Errorf("rule: %s; broken by\n\t%s", r.why, strings.Join(v, "\n\t"))
		}
	}
}

// importers are the only packages of the module that may import a package
// themselves (its tests may always): the embedded nats-server is started by
// the process wiring and the test stacks, so that no library links a server.
var importers = map[string][]string{
	"embedded": {"node", "cmd/...", "bench", "internal/testnats", "internal/testenv", "internal/tenanttest"},
}

func TestOnlyTheProcessWiringAndTheTestsImportTheEmbeddedServer(t *testing.T) {
	g, err := load([]string{module + "/..."})
	if err != nil {
		t.Fatal(err)
	}
	for target, allowed := range importers {
		for _, v := range strayImporters(g, abs(target), allowed) {
			t.Errorf("only %s may import %s; broken by\n\t%s", strings.Join(allowed, ", "), target, v)
		}
	}
}

// strayImporters returns, sorted, one line per package of g that imports
// target and is not named by allowed (module-relative; "dir/..." names dir
// and everything below it).
func strayImporters(g graph, target string, allowed []string) []string {
	var out []string
	for _, path := range slices.Sorted(maps.Keys(g)) {
		rel, ours := strings.CutPrefix(path, module+"/")
		if !ours || path == target || !slices.Contains(g[path].Imports, target) {
			continue
		}
		if !slices.ContainsFunc(allowed, func(a string) bool { return matches(a, rel) }) {
			out = append(out, fmt.Sprintf("%s imports %s", rel, short(target)))
		}
	}
	return out
}

// matches reports whether the module-relative package rel is named by
// pattern, a package or "dir/...".
func matches(pattern, rel string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return rel == dir || strings.HasPrefix(rel, dir+"/")
	}
	return rel == pattern
}

// TestCheck_NamesTheChain checks the checker on a graph with known faults.
func TestCheck_NamesTheChain(t *testing.T) {
	g := graph{}
	add := func(path string, std bool, imports ...string) {
		g[path] = pkg{ImportPath: path, Standard: std, Imports: imports}
	}
	add(abs("cmd/query"), false, abs("node"), "fmt")
	add(abs("node"), false, abs("projection"), abs("query"))
	add(abs("projection"), false, "go.etcd.io/bbolt", abs("."))
	add(abs("query"), false, abs("."))
	add(abs("."), false, "encoding/json", "os")
	add(abs("fold"), false, abs("record"), abs("."))
	add(abs("record"), false, "github.com/klauspost/compress/zstd")
	add(abs("authz"), false, abs("."))
	add("go.etcd.io/bbolt", false, "os")
	add("github.com/klauspost/compress/zstd", false)
	for _, p := range []string{"fmt", "os", "encoding/json"} {
		add(p, true)
	}
	add(abs("capture"), false, abs("."), "github.com/nats-io/nats.go")
	add("github.com/nats-io/nats.go", false, "fmt")
	add(abs("embedded"), false, "fmt")
	add(abs("node/x"), false, abs("embedded"))
	add(abs("tools"), false, abs("embedded"))
	noBolt := rule{packages: []string{"cmd/query", "query"}, forbid: heavyLibrary}
	if got, want := strayImporters(g, abs("embedded"), []string{"node/..."}), []string{"tools imports embedded"}; !slices.Equal(got, want) {
		t.Errorf("stray importers %q, want %q", got, want)
	}
	add(abs("engine"), false, abs("query/wire"), abs("shardhost"))
	add(abs("query/wire"), false, abs("."))
	add(abs("shardhost"), false, abs("projection"), "github.com/nats-io/nats.go")
	pureCapture := ruleNamed(t, "pure-converters")
	pureCapture.packages = []string{"capture"}
	pureEngine := ruleNamed(t, "pure-engine")
	pureEngine.packages = []string{"engine"}
	noOS := rule{packages: []string{"."}, direct: true, forbid: ruleNamed(t, "no-io").forbid}
	for _, tt := range []struct {
		rule rule
		want []string
	}{
		{noBolt, []string{"cmd/query links bbolt: cmd/query -> node -> projection -> go.etcd.io/bbolt"}},
		{ruleNamed(t, "pure-vocabulary"), []string{"fold links record: fold -> record"}},
		{noOS, []string{"dshq (root) imports os: dshq (root) -> os"}},
		{pureCapture, []string{"capture links NATS (github.com/nats-io/nats.go): capture -> github.com/nats-io/nats.go"}},
		{pureEngine, []string{
			"engine links NATS (github.com/nats-io/nats.go): engine -> shardhost -> github.com/nats-io/nats.go",
			"engine links bbolt: engine -> shardhost -> projection -> go.etcd.io/bbolt",
		}},
	} {
		if got := check(g, tt.rule); !slices.Equal(got, tt.want) {
			t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
		}
	}
}

// check returns one line per package of r and forbidden thing it reaches:
// the shortest import chain from one to the other (the first a
// breadth-first walk over sorted imports finds).
func check(g graph, r rule) []string {
	verb := "links"
	if r.direct {
		verb = "imports"
	}
	var out []string
	for _, p := range r.packages {
		root := abs(p)
		for _, f := range r.broken(g, root) {
			out = append(out, fmt.Sprintf("%s %s %s: %s", short(root), verb, f.what, strings.Join(shortAll(f.chain), " -> ")))
		}
	}
	return out
}

// finding is one forbidden thing a package reaches, and how.
type finding struct {
	what  string
	chain []string
}

// broken walks root's imports (only the direct ones for a direct rule)
// breadth first, not through forbidden packages, and returns the first
// chain to each forbidden thing.
func (r rule) broken(g graph, root string) []finding {
	prev := map[string]string{root: ""}
	queue := []string{root}
	seen := map[string]bool{}
	var found []finding
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, next := range slices.Sorted(slices.Values(g[cur].Imports)) {
			if _, ok := prev[next]; ok {
				continue
			}
			prev[next] = cur
			if what := r.forbid(g[next]); what != "" {
				if !seen[what] {
					seen[what] = true
					found = append(found, finding{what: what, chain: chainTo(prev, next)})
				}
				continue // what it links in turn says nothing more
			}
			if !r.direct {
				queue = append(queue, next)
			}
		}
		if r.direct {
			break
		}
	}
	return found
}

func chainTo(prev map[string]string, last string) []string {
	var chain []string
	for p := last; p != ""; p = prev[p] {
		chain = append(chain, p)
	}
	slices.Reverse(chain)
	return chain
}

// load runs go list -deps -json on roots (from the module root) and
// returns the graph of everything they link.
func load(roots []string) (graph, error) {
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Imports,Standard"}, roots...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list output: %w", err)
		}
		g[p.ImportPath] = p
	}
	for _, r := range roots {
		if _, ok := g[r]; !ok && !strings.HasSuffix(r, "/...") {
			return nil, fmt.Errorf("go list did not list %s", r)
		}
	}
	return g, nil
}

// expand resolves the "dir/..." patterns among packages (module-relative)
// to the packages go list finds there.
func expand(packages []string) ([]string, error) {
	var out []string
	for _, p := range packages {
		if !strings.HasSuffix(p, "/...") {
			out = append(out, p)
			continue
		}
		cmd := exec.Command("go", "list", abs(p))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		list, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list %s: %v\n%s", p, err, stderr.Bytes())
		}
		for _, path := range strings.Fields(string(list)) {
			out = append(out, short(path))
		}
	}
	return out, nil
}

// abs returns the import path of a module-relative package.
func abs(rel string) string {
	if rel == "." {
		return module
	}
	return module + "/" + rel
}

// short returns the module-relative name of an import path.
func short(path string) string {
	if path == module {
		return "dshq (root)"
	}
	return strings.TrimPrefix(path, module+"/")
}

func shortAll(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = short(p)
	}
	return out
}
