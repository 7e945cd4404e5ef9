package web

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
)

// importUsageFixtures imports cmd/dshq's usage fixtures (a Claude Code
// project captured on "laptop", a Codex rollout on "desktop") and returns
// the last generation.
func (s *stack) importUsageFixtures(t *testing.T) uint64 {
	t.Helper()
	var gen uint64
	for _, m := range []string{"laptop", "desktop"} {
		root := filepath.Join("..", "cmd", "dshq", "testdata", "usage", m)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			res, err := follow.ImportOn(testContext(t), s.store, capture.Detect(p, data), p, data, m)
			gen = max(gen, res.LastSeq)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return gen
}

// usageSession is a session written through the SDK whose one model call
// used in input and out output tokens of deepseek-chat.
func usageSession(id string, in, out int) []string {
	return []string{
		`{"type":"session","version":2,"id":"` + id + `","createdAt":1772445600000,"cwd":"/work/gamma","isSeeded":false,"delegationDepth":0}`,
		`{"type":"turn/start","seq":0,"time":1772445600100,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":1772445600101,"data":{"id":"m-u1","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"Summarise the build log"}]},"surfaceOp":"append"}`,
		`{"type":"step/start","seq":2,"time":1772445600103,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":3,"time":1772445600900,"data":{"turn":1,"step":1,"message":{"id":"m-a1","role":"assistant","source":{"kind":"model","provider":"deepseek-official","model":"deepseek-chat"},"content":[{"type":"text","text":"The build is green."}]},"usage":{"inputTokens":` + itoa(in) + `,"outputTokens":` + itoa(out) + `}},"surfaceOp":"append"}`,
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestUsagePage(t *testing.T) {
	s := newStack(t)
	s.waitGeneration(t, s.importUsageFixtures(t))
	body := s.page(t, "/usage?tz=UTC&stack=machine")
	mustContain(t, "usage page", body, `id="usage-data"`, "laptop", "desktop", "cc-aaaaaaaa-0000-4000-8000-000000000001", "/work/alpha", "5,170", "unpriced")
	if strings.Contains(body, "<script>") || strings.Contains(body, " style=") {
		t.Errorf("the usage page has an inline script or style:\n%s", body)
	}
	code, _, _ := s.get(t, "/usage?tz=Mars/Olympus")
	if code != 400 {
		t.Errorf("an unknown time zone answers %d, want 400", code)
	}
	code, js, h := s.get(t, "/usage/data?tz=UTC")
	var d usageData
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || json.Unmarshal([]byte(js), &d) != nil || d.Totals.TotalTokens != 5170 {
		t.Errorf("/usage/data: %d %s %s", code, h.Get("Content-Type"), js)
	}
}

// TestBrowserUsagePage opens the Usage page in Chromium and checks that it
// draws its charts under the UI's CSP and Trusted Types, and that it
// updates when a new assistant record with usage is committed.
func TestBrowserUsagePage(t *testing.T) {
	chromium(t)
	s := newStack(t)
	s.waitGeneration(t, s.importUsageFixtures(t))
	dir := screenshotDir(t)
	b := &browse{t: t, ctx: newBrowser(t, 1280, 900), base: strings.TrimSuffix(s.srv.URL, "/"), dir: dir}
	b.open("/usage?tz=UTC", "#chart-tokens svg rect")
	if got := eval[string](b, `document.getElementById('total-tokens').textContent`); got != "5,170" {
		t.Fatalf("total tokens %q, want 5,170", got)
	}
	bars := eval[int](b, `document.querySelectorAll('#chart-tokens rect[data-day]').length`)
	if bars < 6 {
		t.Errorf("the tokens chart has %d bars, want one per day and model (6)", bars)
	}
	b.waitFor(10*time.Second, `document.getElementById('usage-status').dataset.state === 'live'`)
	if got := eval[string](b, `document.getElementById('usage-status').textContent`); got != "Feed connected" {
		t.Errorf("the status says %q, want the other pages' %q", got, "Feed connected")
	}
	// The token axis reads in round steps (1, 2, 2.5 or 5 × 10^n), and no
	// two series of a chart share a color.
	for _, tick := range eval[[]string](b, `[...document.querySelectorAll('#chart-tokens text.tick[text-anchor="end"]')].map((t) => t.textContent)`) {
		if !regexp.MustCompile(`^\d+(\.5)?[kMB]?$`).MatchString(tick) {
			t.Errorf("the tokens axis has a tick %q, not a round step", tick)
		}
	}
	fills := eval[[]string](b, `[...document.querySelectorAll('#chart-tokens rect:not([data-day])')].map((r) => r.getAttribute('fill'))`)
	if seen := map[string]bool{}; len(fills) < 2 || func() bool {
		for _, f := range fills {
			if seen[f] {
				return true
			}
			seen[f] = true
		}
		return false
	}() {
		t.Errorf("the legend's colors %v: want one color per series, none twice", fills)
	}

	// A new assistant record with usage arrives: the totals, the charts
	// and the lists follow without a reload.
	s.importLines(t, usageSession("s-usage-live", 1200, 300)...)
	b.waitFor(20*time.Second, `document.getElementById('total-tokens').textContent === '6,670'`)
	if !eval[bool](b, `[...document.querySelectorAll('#top-projects td')].some((td) => td.textContent === '/work/gamma')`) {
		t.Error("the top projects do not list /work/gamma after its first call")
	}
	if !eval[bool](b, `document.querySelector('#chart-tokens rect[data-key="deepseek-chat"]') !== null`) {
		t.Error("the tokens chart has no deepseek-chat bar after its first call")
	}
	b.check("usage")
	b.shot("usage")
	if out := os.Getenv("DSH_USAGE_SCREENSHOT"); out != "" {
		png, err := os.ReadFile(filepath.Join(dir, "usage.png"))
		if err == nil {
			err = os.WriteFile(out, png, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
