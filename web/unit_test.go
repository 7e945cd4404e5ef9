package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanShowsControlsAsSymbols(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain text, 中文, café", "plain text, 中文, café"},
		{"tab\tand\nnewline", "tab\tand\nnewline"},
		{"crlf\r\nline", "crlf\nline"},
		{"lone\rcr", "lone\u240dcr"},
		{"\x1b[31mred\x1b[0m", "\u241b[31mred\u241b[0m"},
		{"nul\x00 del\x7f", "nul\u2400 del\u2421"},
		{"c1\u0085 \u009b", "c1⟨U+0085⟩ ⟨U+009B⟩"},
		{"a\u202eb\u2066c\u200fd\u061ce", "a⟨U+202E⟩b⟨U+2066⟩c⟨U+200F⟩d⟨U+061C⟩e"},
		{"bad \xff utf8", "bad \ufffd utf8"},
	}
	for _, c := range cases {
		if got := clean(c.in); got != c.want {
			t.Errorf("clean(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "a\x00b", "\u202e", "\xff\xfe", "\r\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := clean(s)
		if !utf8.ValidString(out) {
			t.Fatalf("clean(%q) is not UTF-8", s)
		}
		for _, r := range out {
			if r < 0x20 && r != '\t' && r != '\n' || r == 0x7f || r >= 0x80 && r < 0xa0 || isBidiControl(r) {
				t.Fatalf("clean(%q) = %q keeps %U", s, out, r)
			}
		}
		if clean(out) != out {
			t.Fatalf("clean is not idempotent on %q", s)
		}
	})
}

func TestHighlightMarksThePhraseAsSearchFindsIt(t *testing.T) {
	cases := []struct {
		snippet, query string
		hits           []string
	}{
		{"Find where the retry budget is configured", "retry budget", []string{"retry budget"}},
		{"Retry   BUDGET, then retry budget", "retry budget", []string{"Retry   BUDGET", "retry budget"}},
		{"Check the CAFÉ menu", "cafe", []string{"CAFÉ"}},
		{"in 中文 and 重试预算 here", "试预", []string{"试预"}},
		{"BRAID is not AI", "ai", []string{"AI"}},
		{"nothing here", "absent", nil},
		{"<b>tag</b> text", "b tag", []string{"b>tag"}},
	}
	for _, c := range cases {
		var hits []string
		var joined strings.Builder
		for _, s := range highlight(c.snippet, c.query) {
			joined.WriteString(s.Text)
			if s.Hit {
				hits = append(hits, s.Text)
			}
		}
		if joined.String() != c.snippet {
			t.Errorf("highlight(%q) loses text: %q", c.snippet, joined.String())
		}
		if !reflect.DeepEqual(hits, c.hits) {
			t.Errorf("highlight(%q, %q) marks %q, want %q", c.snippet, c.query, hits, c.hits)
		}
	}
}

func TestSplitFencesKeepsCodeApart(t *testing.T) {
	got := splitFences("Here:\n```go\nfunc f() {}\n```\nand done")
	want := []textPart{{Text: "Here:"}, {Code: true, Lang: "go", Text: "func f() {}"}, {Text: "and done"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	if got := splitFences("no fences"); len(got) != 1 || got[0].Text != "no fences" {
		t.Fatalf("got %+v", got)
	}
	if got := splitFences("open\n```\nnever closed"); got[len(got)-1].Text != "never closed" || !got[len(got)-1].Code {
		t.Fatalf("an unclosed fence: %+v", got)
	}
}

func TestRecordReadsTheHarnessMember(t *testing.T) {
	var r sessionRecord
	if err := json.Unmarshal([]byte(`{"header":{"version":2,"id":"cc-1","createdAt":1,"isSeeded":false,"harness":"claude-code"},"live":true,"persisted":true}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Harness != "claude-code" || r.Header.ID != "cc-1" || !r.Live {
		t.Fatalf("%+v", r)
	}
	f := filters{Harness: "codex"}
	if f.keeps(r, false) {
		t.Error("the codex filter keeps a Claude Code session")
	}
	if !(filters{Harness: "claude-code"}).keeps(r, false) {
		t.Error("the claude-code filter drops a Claude Code session")
	}
}

func TestCheckBindNeedsATokenOffLoopback(t *testing.T) {
	cases := []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:4280", "", true},
		{"127.5.6.7:0", "", true},
		{"[::1]:4280", "", true},
		{"localhost:4280", "", true},
		{"0.0.0.0:4280", "", false},
		{":4280", "", false},
		{"192.0.2.10:4280", "", false},
		{"example.com:4280", "", false},
		{"0.0.0.0:4280", "s3cret", true},
	}
	for _, c := range cases {
		err := CheckBind(c.addr, c.token)
		if (err == nil) != c.ok {
			t.Errorf("CheckBind(%q, %q) = %v", c.addr, c.token, err)
		}
		if err != nil && c.addr != "" && !errors.Is(err, ErrTokenRequired) {
			t.Errorf("CheckBind(%q): %v is not ErrTokenRequired", c.addr, err)
		}
	}
	if err := CheckBind("nonsense", ""); err == nil {
		t.Error("an address without a port is accepted")
	}
}

// bare is a Server with no bus behind it: enough for what is decided
// before any query (authorisation, static files).
func bare(t *testing.T, opts ...Option) *Server {
	t.Helper()
	s := &Server{pageSize: DefaultPageSize, listSize: DefaultListSize, harnesses: map[string]bool{}}
	for _, o := range opts {
		o(s)
	}
	var err error
	if s.static, err = loadStatic(); err != nil {
		t.Fatal(err)
	}
	if err := s.parseTemplates(); err != nil {
		t.Fatal(err)
	}
	s.log = discardLogger()
	s.routes()
	return s
}

func serve(s *Server, req *http.Request) *httptest.ResponseRecorder {
	if req.Host == "example.com" { // httptest's default
		req.Host = "127.0.0.1"
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	return w
}

func TestWithoutATokenOnlyLoopbackHostsAreServed(t *testing.T) {
	s := bare(t)
	for host, want := range map[string]int{
		"127.0.0.1:4280": http.StatusOK, "localhost:4280": http.StatusOK, "[::1]:4280": http.StatusOK,
		"evil.example:4280": http.StatusMisdirectedRequest, "10.0.0.1": http.StatusMisdirectedRequest,
	} {
		req := httptest.NewRequest(http.MethodGet, "/static/app.css", nil)
		req.Host = host
		if w := serve(s, req); w.Code != want {
			t.Errorf("Host %s: %d, want %d", host, w.Code, want)
		}
	}
}

func TestATokenIsPresentedOnceThenHeldInACookie(t *testing.T) {
	s := bare(t, WithToken("s3cret"))
	get := func(target string, mod func(*http.Request)) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req.Host = "ui.example:4280"
		if mod != nil {
			mod(req)
		}
		return serve(s, req)
	}
	if w := get("/nothing", nil); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "needs its token") {
		t.Fatalf("no token: %d %s", w.Code, w.Body)
	}
	if w := get("/nothing?token=wrong", nil); w.Code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", w.Code)
	}
	w := get("/nothing?token=s3cret&q=x", nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/nothing?q=x" {
		t.Fatalf("token link: %d %q", w.Code, w.Header().Get("Location"))
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode || strings.Contains(cookies[0].Value, "s3cret") {
		t.Fatalf("cookie: %+v", cookies)
	}
	if w := get("/nothing", func(r *http.Request) { r.AddCookie(cookies[0]) }); w.Code != http.StatusNotFound {
		t.Fatalf("with the cookie: %d", w.Code)
	}
	if w := get("/nothing", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: cookieName, Value: "forged"}) }); w.Code != http.StatusUnauthorized {
		t.Fatalf("a forged cookie: %d", w.Code)
	}
	if w := get("/nothing", func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret") }); w.Code != http.StatusNotFound {
		t.Fatalf("bearer: %d", w.Code)
	}
	if w := get(s.assetURL("app.css"), nil); w.Code != http.StatusOK {
		t.Fatalf("assets need no token: %d", w.Code)
	}
}

func TestAssetsAreEmbeddedAndCached(t *testing.T) {
	s := bare(t)
	for _, name := range []string{"app.css", "app.js", "icon.svg"} {
		req := httptest.NewRequest(http.MethodGet, s.assetURL(name), nil)
		w := serve(s, req)
		if w.Code != http.StatusOK || w.Body.Len() == 0 || !strings.Contains(w.Header().Get("Cache-Control"), "immutable") {
			t.Errorf("%s: %d, %d bytes, %q", name, w.Code, w.Body.Len(), w.Header().Get("Cache-Control"))
		}
	}
	js := string(s.static["app.js"].body)
	if strings.Contains(js, "eval(") || strings.Contains(js, "new Function") || strings.Contains(js, ".innerHTML = ") && !strings.Contains(js, "policy.createHTML") {
		t.Error("app.js uses a sink outside the Trusted Types policy")
	}
	if w := serve(s, httptest.NewRequest(http.MethodGet, "/static/nope.js", nil)); w.Code != http.StatusNotFound {
		t.Errorf("a missing asset: %d", w.Code)
	}
}
