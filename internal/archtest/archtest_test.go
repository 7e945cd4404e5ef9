package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
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
		why:      "the pure cores, the vocabulary, the record codec, the engine and the wire do no I/O of their own: they import no package with a capability for it",
		packages: []string{"fold", "authz", ".", "record", "engine", "query/wire", "capture", "capture/claudecode", "capture/codex"},
		direct:   true,
		forbid:   ioCapability,
	},
	{
		name:     "no-test-helpers",
		why:      "no command links the testing package or a test helper of ours (internal/test*, */toolstest, capturetest, harnesssim)",
		packages: []string{"cmd/..."},
		forbid:   testHelper,
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

// ioCapabilities are the standard packages that can reach the outside
// world: files, the network, logs, signals, processes, plugins.
var ioCapabilities = []string{"os", "net", "log", "syscall", "plugin", "io/fs", "io/ioutil", "path/filepath", "embed", "runtime/debug"}

// ioCapability names the I/O capability p gives ("" for none): one of
// ioCapabilities or a package below one (os/signal, net/http, log/slog…).
func ioCapability(p pkg) string {
	for _, c := range ioCapabilities {
		if p.ImportPath == c || strings.HasPrefix(p.ImportPath, c+"/") {
			return p.ImportPath
		}
	}
	return ""
}

// testHelper names p when it is the testing package or a test helper of
// ours: a package one of whose path elements is a test stack or helper.
func testHelper(p pkg) string {
	if p.ImportPath == "testing" || strings.HasPrefix(p.ImportPath, "testing/") {
		return p.ImportPath
	}
	rel, ours := strings.CutPrefix(p.ImportPath, module+"/")
	if !ours {
		return ""
	}
	for _, el := range strings.Split(rel, "/") {
		if strings.HasPrefix(el, "test") || strings.HasSuffix(el, "test") || el == "harnesssim" {
			return "the test helper " + rel
		}
	}
	return ""
}

// layers orders the module's packages, lowest first: a package imports
// only packages of its own layer or lower ones (module-relative; a package
// not listed is not ordered; "dir/..." names dir and everything below).
var layers = [][]string{
	{"."},
	{"fold", "record", "authz", "query/wire", "engine", "shellenv", "embedded"},
	{"bus", "index", "capture", "capture/claudecode", "capture/codex", "capture/internal/build", "query", "tenancy"},
	{"feed", "projection", "capture/follow", "shards", "tools"},
	{"feed/feedcommit", "shardhost", "admin", "tools/toolservice", "tools/mcpserver", "web"},
	{"node"},
	{"cmd/..."},
}

// layerOf returns the layer of the module-relative package rel, or -1.
func layerOf(rel string) int {
	for i, l := range layers {
		if slices.ContainsFunc(l, func(p string) bool { return matches(p, rel) }) {
			return i
		}
	}
	return -1
}

// upwardImports returns, sorted, one line per import of g from an ordered
// package of ours to one of a higher layer.
func upwardImports(g graph) []string {
	var out []string
	for _, path := range slices.Sorted(maps.Keys(g)) {
		rel, ours := strings.CutPrefix(path, module+"/")
		if path == module {
			rel, ours = ".", true
		}
		from := layerOf(rel)
		if !ours || from < 0 {
			continue
		}
		for _, imp := range slices.Sorted(slices.Values(g[path].Imports)) {
			if to := layerOf(short(imp)); (strings.HasPrefix(imp, module+"/") || imp == module) && to > from {
				out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d)", rel, from, short(imp), to))
			}
		}
	}
	return out
}

func TestLayerOrder(t *testing.T) {
	for _, goos := range releaseGOOS {
		g, err := loadFor(goos, []string{module + "/..."})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range upwardImports(g) {
			t.Errorf("GOOS=%s: a lower layer imports a higher one: %s", goos, v)
		}
	}
}

// releaseGOOS are the systems the import rules are checked for: what the
// binaries are built for (a file built only for one can add an import).
var releaseGOOS = []string{"linux", "darwin", "windows"}

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
	for _, goos := range releaseGOOS {
		g, err := loadFor(goos, roots)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			if len(r.packages) == 0 {
				t.Errorf("rule %s: %s; names no package", r.name, r.why)
			}
			if v := check(g, r); len(v) > 0 {
				t.Errorf("GOOS=%s: rule %s: %s; broken by\n\t%s", goos, r.name, r.why, strings.Join(v, "\n\t"))
			}
		}
	}
}

// importers are the only packages of the module that may import a package
// themselves (its tests may always): the embedded nats-server is started by
// the process wiring and the test stacks, so that no library links a server.
var importers = map[string][]string{
	// tools/toolstest is a test helper of the tools' tests (it starts the
	// real pipeline through internal/testenv).
	"embedded": {"node", "cmd/...", "bench", "internal/testnats", "internal/testenv", "internal/tenanttest", "tools/toolstest"},
}

func TestOnlyTheProcessWiringAndTheTestsImportTheEmbeddedServer(t *testing.T) {
	for _, goos := range releaseGOOS {
		g, err := loadFor(goos, []string{module + "/..."})
		if err != nil {
			t.Fatal(err)
		}
		for target, allowed := range importers {
			for _, v := range strayImporters(g, abs(target), allowed) {
				t.Errorf("GOOS=%s: only %s may link %s; broken by\n\t%s", goos, strings.Join(allowed, ", "), target, v)
			}
		}
	}
}

// strayImporters returns, sorted, one line per package of g that links
// target (imports it, or a package that links it: the test stack counts)
// and is not named by allowed (module-relative; "dir/..." names dir and
// everything below it), with the chain that reaches it.
func strayImporters(g graph, target string, allowed []string) []string {
	var out []string
	reach := rule{forbid: func(p pkg) string {
		if p.ImportPath == target {
			return short(target)
		}
		return ""
	}}
	for _, path := range slices.Sorted(maps.Keys(g)) {
		rel, ours := strings.CutPrefix(path, module+"/")
		if !ours || path == target || slices.ContainsFunc(allowed, func(a string) bool { return matches(a, rel) }) {
			continue
		}
		for _, f := range reach.broken(g, path) {
			out = append(out, fmt.Sprintf("%s links %s: %s", rel, f.what, strings.Join(shortAll(f.chain), " -> ")))
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
	add(abs("web"), false, abs("internal/testenv"))
	add(abs("internal/testenv"), false, abs("embedded"), "testing")
	add("testing", true)
	if got, want := strayImporters(g, abs("embedded"), []string{"node/...", "internal/testenv"}), []string{
		"tools links embedded: tools -> embedded",
		"web links embedded: web -> internal/testenv -> embedded",
	}; !slices.Equal(got, want) {
		t.Errorf("stray importers %q, want %q", got, want)
	}
	// The layer order on planted upward imports.
	layered := graph{}
	for _, imp := range [][2]string{{"record", "capture"}, {"index", "feed"}, {"projection", "web"}, {"web", "projection"}} {
		layered[abs(imp[0])] = pkg{ImportPath: abs(imp[0]), Imports: []string{abs(imp[1])}}
	}
	if got, want := upwardImports(layered), []string{
		"index (layer 2) imports feed (layer 3)",
		"projection (layer 3) imports web (layer 4)",
		"record (layer 1) imports capture (layer 2)",
	}; !slices.Equal(got, want) {
		t.Errorf("upward imports %q, want %q", got, want)
	}
	add(abs("engine"), false, abs("query/wire"), abs("shardhost"))
	add(abs("query/wire"), false, abs("."))
	add(abs("shardhost"), false, abs("projection"), "github.com/nats-io/nats.go")
	pureCapture := ruleNamed(t, "pure-converters")
	pureCapture.packages = []string{"capture"}
	pureEngine := ruleNamed(t, "pure-engine")
	pureEngine.packages = []string{"engine"}
	noOS := rule{packages: []string{"."}, direct: true, forbid: ruleNamed(t, "no-io").forbid}
	add(abs("fold"), false, abs("record"), abs("."), "log/slog")
	add("log/slog", true)
	noIOFold := rule{packages: []string{"fold"}, direct: true, forbid: ruleNamed(t, "no-io").forbid}
	add(abs("cmd/dshq"), false, abs("web"))
	noHelpers := ruleNamed(t, "no-test-helpers")
	noHelpers.packages = []string{"cmd/dshq"}
	for _, tt := range []struct {
		rule rule
		want []string
	}{
		{noBolt, []string{"cmd/query links bbolt: cmd/query -> node -> projection -> go.etcd.io/bbolt"}},
		{ruleNamed(t, "pure-vocabulary"), []string{"fold links record: fold -> record"}},
		{noOS, []string{"dshq (root) imports os: dshq (root) -> os"}},
		{noIOFold, []string{"fold imports log/slog: fold -> log/slog"}},
		{noHelpers, []string{
			"cmd/dshq links the test helper internal/testenv: cmd/dshq -> web -> internal/testenv",
		}},
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

// load is loadFor this system.
func load(roots []string) (graph, error) { return loadFor("", roots) }

// loadFor runs go list -deps -json on roots (from the module root) for
// goos ("" = this system's) and returns the graph of everything they link.
func loadFor(goos string, roots []string) (graph, error) {
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath,Imports,Standard"}, roots...)...)
	if goos != "" {
		cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
	}
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
