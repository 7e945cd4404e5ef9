package web

import (
	"github.com/dshq/dshq/capture/restore"
	"github.com/dshq/dshq/internal/numfmt"

	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// view is what a page handler returns: the page template and its data.
type view struct {
	// Page names the page's template (sessions, search, session, event,
	// lineage, error).
	Page string
	// Title is the document title.
	Title string
	// Nav is the active navigation entry (sessions, search).
	Nav string
	// Live is the page's live stream; zero for a page without one.
	Live liveInfo
	// Data is the page's own data.
	Data any

	redirect string
}

// liveInfo is what the live script needs, written as data- attributes of
// the body (never as script).
type liveInfo struct {
	URL  string // the SSE endpoint, with the page's generation
	Kind string // "session" or "sessions"
}

// pageNames are the templates that are whole pages.
var pageNames = []string{"sessions", "search", "session", "timeline", "event", "lineage", "error"}

// parseTemplates parses the embedded templates into s.tmpl (every
// template, for fragments) and s.pages: one set per page, the layout with
// that page's content.
func (s *Server) parseTemplates() error {
	sub, err := fs.Sub(templateFS, "templates")
	if err != nil {
		return err
	}
	base, err := template.New("layout").Funcs(s.funcs()).ParseFS(sub, "*.html")
	if err != nil {
		return fmt.Errorf("web: templates: %w", err)
	}
	s.tmpl, s.pages = base, map[string]*template.Template{}
	for _, name := range pageNames {
		if base.Lookup(name) == nil {
			return fmt.Errorf("web: templates: no %q template", name)
		}
		t, err := base.Clone()
		if err == nil {
			_, err = t.New("content").Parse(`{{template "` + name + `" .}}`)
		}
		if err != nil {
			return fmt.Errorf("web: templates: %s: %w", name, err)
		}
		s.pages[name] = t
	}
	return nil
}

func (s *Server) funcs() template.FuncMap {
	return template.FuncMap{
		"asset":       s.assetURL,
		"sessionURL":  sessionURL,
		"eventURL":    func(id string, seq int64) string { return eventURL(id, seq, s.pageSize) },
		"traceURL":    traceURL,
		"lineageURL":  lineageURL,
		"wsURL":       func(cwd string) string { return "/?" + url.Values{"cwd": {cwd}}.Encode() },
		"searchInURL": func(id string) string { return "/search?" + url.Values{"session": {id}}.Encode() },
		"iso":         isoTime,
		"when":        whenTime,
		"thousands":   numfmt.Thousands,
		"duration":    duration,
		"harness":     harnessLabel,
		"restoreHint": restore.HintFor,
		"add":         func(a, b int64) int64 { return a + b },
		"deref":       func(p *int64) int64 { return *p },
		"int64":       func(n int) int64 { return int64(n) },
		"plural":      plural,
		"inList": func(s string, list []string) bool {
			for _, x := range list {
				if x == s {
					return true
				}
			}
			return false
		},
	}
}

// render writes v as a whole page with the given status.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, v *view) {
	var buf bytes.Buffer
	err := s.pages[v.Page].ExecuteTemplate(&buf, "layout", v)
	if err != nil {
		s.log.Error("web: render", "page", v.Page, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fragment renders one named template (an event or a row) to a string.
func (s *Server) fragment(name string, data any) (string, error) {
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// fail renders err as the error page.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := pageError(err)
	if e.status >= 500 {
		s.log.Warn("web: page failed", "path", r.URL.Path, "status", e.status, "err", err)
	}
	s.render(w, r, e.status, &view{Page: "error", Title: e.title, Data: e})
}

// Status and message of the error page.
func (e *httpError) Status() int      { return e.status }
func (e *httpError) Heading() string  { return e.title }
func (e *httpError) Message() string  { return clean(e.msg) }
func (e *httpError) Code() string     { return string(e.code) }
func (e *httpError) Link() string     { return e.link }
func (e *httpError) LinkText() string { return e.linkText }

func sessionURL(id string) string { return "/s/" + url.PathEscape(id) }

func traceURL(id string, seq int64) string {
	return sessionURL(id) + "/e/" + strconv.FormatInt(seq, 10)
}

func lineageURL(id string) string { return sessionURL(id) + "/lineage" }

// eventURL links to the transcript page that holds seq, anchored at it.
func eventURL(id string, seq, pageSize int64) string {
	return sessionURL(id) + "?page=" + strconv.FormatInt(seq/pageSize, 10) + "#e-" + strconv.FormatInt(seq, 10)
}

// isoTime formats epoch milliseconds as RFC 3339 UTC with milliseconds.
func isoTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// whenTime formats epoch milliseconds for people (UTC; the script shows it
// in the reader's zone).
func whenTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05 UTC")
}

// Harness names the UI knows how to label.
var harnessLabels = map[string]string{
	"deepseek-harness": "deepseek-harness",
	"claude-code":      "Claude Code",
	"codex":            "Codex",
}

func harnessLabel(h string) string {
	if l, ok := harnessLabels[h]; ok {
		return l
	}
	return clean(h)
}
