package web

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/microhost"
	"github.com/dshq/dshq/query"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Defaults of a Server.
const (
	// DefaultPageSize is the number of events on one transcript page.
	DefaultPageSize = 100
	// DefaultListSize is the number of sessions on one list page.
	DefaultListSize = 50
	// DefaultStatusEvery is how often a live stream reports its state.
	DefaultStatusEvery = 2 * time.Second
	// queryTimeout bounds the query calls of one page.
	queryTimeout = 15 * time.Second
	// fanout bounds the concurrent query calls of one page.
	fanout = 8
)

// Server is the web UI's http.Handler. It is safe for concurrent use;
// Close ends its live streams.
type Server struct {
	qc          *query.Client
	js          jetstream.JetStream
	nc          *nats.Conn
	log         *slog.Logger
	token       string
	feedStream  string
	pageSize    int64
	listSize    int
	statusEvery time.Duration

	tmpl   *template.Template            // every template, for fragments
	pages  map[string]*template.Template // the layout with one page's content
	static map[string]asset              // by name
	mux    *http.ServeMux

	// live streams end when ctx is cancelled (Close); wg counts them, and
	// lifeMu orders a stream's wg.Add before Close's Wait (closed refuses
	// streams after it).
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	lifeMu sync.Mutex
	closed bool

	// mu guards harnesses: the harness values seen in session headers.
	mu        sync.Mutex
	harnesses map[string]bool
	// harnessProbe is when knownHarnesses last asked the API (guarded by mu).
	harnessProbe time.Time

	// totals are the sessions' totals, kept as they are read.
	totals totalsCache
	// timelines are the sessions' timeline builders (timeline.go).
	timelines timelineCache
	// counts are the counts of recent searches.
	searchCounts searchCounts

	// reg receives the request metrics (WithMetrics; nil = none), counted
	// by metrics (nil records nothing).
	reg     prometheus.Registerer
	metrics *microhost.Metrics
}

// asset is one embedded static file.
type asset struct {
	body  []byte
	ctype string
	hash  string
}

// Option configures a Server.
type Option func(*Server)

// WithToken requires every request to present token (see the package
// documentation). "" (the default) requires none; Listen then refuses a
// non-loopback address.
func WithToken(token string) Option { return func(s *Server) { s.token = token } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithFeedStream sets the live feed's stream name (dshq.FeedStream).
func WithFeedStream(name string) Option { return func(s *Server) { s.feedStream = name } }

// WithPageSize sets the number of events on a transcript page
// (DefaultPageSize; at least 1).
func WithPageSize(n int) Option {
	return func(s *Server) {
		if n > 0 {
			s.pageSize = int64(n)
		}
	}
}

// WithListSize sets the number of sessions on a list page (DefaultListSize;
// 1..dshq.MaxSearchLimit).
func WithListSize(n int) Option {
	return func(s *Server) {
		if n > 0 && n <= 100 {
			s.listSize = n
		}
	}
}

// WithStatusEvery sets how often a live stream reports its state
// (DefaultStatusEvery).
func WithStatusEvery(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.statusEvery = d
		}
	}
}

// New returns the UI of the deployment nc is connected to. nc needs the
// trusted permissions: requests to dsh.query.v1.> and consumers on the feed
// stream.
func New(nc *nats.Conn, opts ...Option) (*Server, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("web: jetstream: %w", err)
	}
	s := &Server{
		qc: query.NewClient(nc), js: js, nc: nc, log: slog.Default(),
		feedStream: dshq.FeedStream, pageSize: DefaultPageSize, listSize: DefaultListSize,
		statusEvery: DefaultStatusEvery, harnesses: map[string]bool{},
	}
	for _, o := range opts {
		o(s)
	}
	if s.static, err = loadStatic(); err != nil {
		return nil, err
	}
	if err := s.parseTemplates(); err != nil {
		return nil, err
	}
	if s.metrics, err = microhost.NewMetrics(s.reg, webMetrics); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.routes()
	return s, nil
}

// Close ends every live stream and waits for them. Call it before
// http.Server.Shutdown, which would otherwise wait for them.
func (s *Server) Close() {
	s.lifeMu.Lock()
	s.closed = true
	s.lifeMu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// startStream counts a live stream, or reports false once Close was called.
func (s *Server) startStream() bool {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", s.page(s.sessionsPage))
	m.HandleFunc("GET /search", s.page(s.searchPage))
	m.HandleFunc("GET /s/{id}", s.page(s.conversationPage))
	m.HandleFunc("GET /s/{id}/log", s.page(s.logPage))
	m.HandleFunc("GET /s/{id}/timeline", s.page(s.timelinePage)) // timeline.go
	m.HandleFunc("GET /s/{id}/e/{seq}", s.page(s.eventPage))
	m.HandleFunc("GET /s/{id}/lineage", s.page(s.lineagePage))
	m.HandleFunc("GET /s/{id}/live", s.sessionLive)
	m.HandleFunc("GET /live", s.listLive)
	m.HandleFunc("GET /api/counts", s.counts)
	m.HandleFunc("GET /usage", s.usagePage) // usage.go
	m.HandleFunc("GET /usage/data", s.usageDataJSON)
	m.HandleFunc("GET /usage/live", s.usageLive)
	m.HandleFunc("GET /static/{name}", s.serveStatic)
	m.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, s.assetURL("icon.svg"), http.StatusMovedPermanently)
	})
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, &httpError{status: http.StatusNotFound, title: "Not found", msg: "There is no page at " + r.URL.Path + "."})
	})
	s.mux = m
}

// ServeHTTP serves the UI: security headers on every answer, then the
// request's authorisation, then the page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.metrics != nil {
		sw := &statusWriter{ResponseWriter: w}
		defer s.observe(sw, r, time.Now())
		w = sw
	}
	setSecurityHeaders(w.Header())
	if !s.authorize(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// loadStatic reads the embedded assets and their content hashes.
func loadStatic() (map[string]asset, error) {
	out := map[string]asset{}
	types := map[string]string{".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		sum := sha256.Sum256(b)
		out[name] = asset{body: b, ctype: types[path.Ext(name)], hash: hex.EncodeToString(sum[:6])}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("web: static assets: %w", err)
	}
	return out, nil
}

// assetURL is the cache-busting URL of an embedded asset.
func (s *Server) assetURL(name string) string {
	a, ok := s.static[name]
	if !ok {
		return "/static/" + name
	}
	return "/static/" + name + "?v=" + a.hash
}

func (s *Server) serveStatic(w http.ResponseWriter, r *http.Request) {
	a, ok := s.static[r.PathValue("name")]
	if !ok || a.ctype == "" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.ctype)
	if r.URL.Query().Get("v") == a.hash {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	w.Header().Set("ETag", `"`+a.hash+`"`)
	if r.Header.Get("If-None-Match") == `"`+a.hash+`"` {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(a.body)
}

// sawHarness records the harness values of session headers.
func (s *Server) sawHarness(hs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range hs {
		if h != "" {
			s.harnesses[h] = true
		}
	}
}

// harnessProbeEvery bounds how often a UI that has seen no converted
// session asks the API whether the corpus holds one (a filter read that
// scans the sessions when it holds none).
const harnessProbeEvery = 30 * time.Second

// convertedHarnesses are the harnesses whose files dshq converts
// (docs/harnesses.md): the filter offers them all once the corpus holds a
// session of any.
var convertedHarnesses = []string{dshq.HarnessClaudeCode, dshq.HarnessCodex}

// knownHarnesses returns the harness filter's values: none while the
// corpus holds no session converted from a Claude Code or Codex file (the
// UI has seen none, and one sessions.filter read finds none); else the
// native sessions' (deepseek-harness), the converted harnesses, and any
// other harness value seen, sorted.
func (s *Server) knownHarnesses(ctx context.Context) []string {
	s.mu.Lock()
	probe := len(s.harnesses) == 0 && time.Since(s.harnessProbe) >= harnessProbeEvery
	if probe {
		s.harnessProbe = time.Now()
	}
	s.mu.Unlock()
	if probe {
		vals := make([]*string, len(convertedHarnesses))
		for i := range convertedHarnesses {
			vals[i] = &convertedHarnesses[i]
		}
		// listRecords records the harness of what it finds.
		if _, err := s.listRecords(ctx, []dshq.Filter{{Kind: dshq.FilterHarness, Values: vals}}, 1, ""); err != nil {
			return nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.harnesses) == 0 {
		return nil
	}
	set := map[string]bool{}
	for _, h := range convertedHarnesses {
		set[h] = true
	}
	for h := range s.harnesses {
		set[h] = true
	}
	out := make([]string, 0, len(set)+1)
	for h := range set {
		out = append(out, h)
	}
	sort.Strings(out)
	return append([]string{nativeHarness}, out...)
}

// page adapts a page handler: it renders the page's template with its
// data, or the error page.
func (s *Server) page(fn func(*http.Request) (*view, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
		defer cancel()
		v, err := fn(r.WithContext(ctx))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if v.redirect != "" {
			http.Redirect(w, r, v.redirect, http.StatusSeeOther)
			return
		}
		s.render(w, r, http.StatusOK, v)
	}
}
