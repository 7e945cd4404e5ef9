package web

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/numfmt"
)

// chromium returns the browser to drive: $DSH_CHROMIUM, else the first of
// Debian's and Google's names on PATH. Without one the test fails in CI
// (CI set) and is skipped elsewhere.
func chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("DSH_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("Chromium is not installed, and CI needs the browser test: run `make setup` (apt-get install chromium)")
	}
	t.Skip("Chromium is not installed (make setup installs it): the browser test is skipped")
	return ""
}

// newBrowser starts a headless Chromium with a fresh profile for the test's
// duration and returns its context. The flags keep it off the network: this
// machine refuses the browser's own background connections.
func newBrowser(t testing.TB, width, height int) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	)
	actx, stopAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, stopBrowser := chromedp.NewContext(actx)
	// The browser process is killed and reaped before the profile
	// directory (an earlier cleanup, so a later one to run) is removed.
	t.Cleanup(func() { stopBrowser(); stopAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromium(t), err)
	}
	// Every page records what the browser refused (CSP, Trusted Types) and
	// any script error; check() fails the test on any.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.__problems = [];
		document.addEventListener('securitypolicyviolation', (e) => window.__problems.push('CSP ' + e.violatedDirective + ' ' + e.blockedURI));
		window.addEventListener('error', (e) => window.__problems.push('error ' + e.message));
	`}); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// browse drives one page with a deadline per step.
type browse struct {
	t    *testing.T
	ctx  context.Context
	base string
	dir  string
}

func (b *browse) step(d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

func (b *browse) open(path, waitFor string) {
	b.t.Helper()
	b.step(20*time.Second, chromedp.Navigate(b.base+path), chromedp.WaitVisible(chromedp.CSS(waitFor)))
	b.check(path)
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browse, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// check fails on anything the page's recorder saw.
func (b *browse) check(what string) {
	b.t.Helper()
	if p := eval[[]string](b, `window.__problems || []`); len(p) > 0 {
		b.t.Errorf("%s: the browser reported %q", what, p)
	}
}

// waitFor polls a JavaScript condition until d.
func (b *browse) waitFor(d time.Duration, cond string) {
	b.t.Helper()
	b.step(d+5*time.Second, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(20*time.Millisecond)))
}

// shot saves a full-page screenshot as dir/name.png.
func (b *browse) shot(name string) { b.save(name, chromedp.FullScreenshot(100)) }

// view saves what the window shows as dir/name.png.
func (b *browse) view(name string) { b.save(name, chromedp.CaptureScreenshot()) }

func (b *browse) save(name string, capture chromedp.Action[[]byte]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, capture)
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s", path)
}

// screenshotDir is where the browser test saves its screenshots:
// $DSH_UI_SCREENSHOTS, else dshq-ui-screenshots in the temporary directory
// (replaced on every run).
func screenshotDir(t testing.TB) string {
	dir := os.Getenv("DSH_UI_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "dshq-ui-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestBrowserWalksTheCorpus(t *testing.T) {
	exe := chromium(t)
	s := newStack(t)
	seedCorpus(t, s)
	h := s.liveSession(t, "live-in-browser", 3)
	b := &browse{t: t, ctx: newBrowser(t, 1280, 900), base: strings.TrimSuffix(s.srv.URL, "/"), dir: screenshotDir(t)}
	t.Logf("browser %s", exe)

	// The list: every session, newest first, the live one badged.
	b.open("/", "#session-rows tr")
	if n := eval[int](b, `document.querySelectorAll('#session-rows tr').length`); n != 5 {
		t.Fatalf("the list shows %d sessions, want 5", n)
	}
	b.waitFor(5*time.Second, `document.querySelector('tr[data-sid="live-in-browser"] [data-live]:not([hidden])') !== null`)
	b.waitFor(5*time.Second, `document.getElementById('live-status').dataset.state === 'live'`)
	b.shot("sessions")

	// Search a phrase from the header's box and open a hit.
	b.step(20*time.Second, chromedp.SendKeys(chromedp.CSS(`.top-search input`), "retry budget\n"), chromedp.WaitVisible(chromedp.CSS(`.hit`)))
	b.check("search")
	marks := eval[[]string](b, `[...document.querySelectorAll('.snippet mark')].map((m) => m.textContent)`)
	if len(marks) == 0 || !strings.EqualFold(marks[0], "retry budget") {
		t.Fatalf("search marks %q", marks)
	}
	b.shot("search")
	b.step(20*time.Second, chromedp.Click(chromedp.CSS(`a.hit-event[href="/s/s-7f3c?page=0#e-17"]`)), chromedp.WaitVisible(chromedp.CSS(`#e-17`)))
	b.waitFor(5*time.Second, `location.hash === '#e-17' && document.querySelector('#e-17:target') !== null`)
	b.check("hit")
	b.view("search-hit")

	// The compaction's shadowed events, and what replaced them.
	b.open("/s/s-7f3c", "#e-15")
	for _, seq := range []int{1, 5, 7} {
		if !eval[bool](b, fmt.Sprintf(`document.getElementById('e-%d').classList.contains('is-shadowed') && document.querySelector('#e-%d .shadowed-by').textContent.includes('#15')`, seq, seq)) {
			t.Errorf("event %d is not shown shadowed by #15", seq)
		}
	}
	if got := eval[string](b, `document.querySelector('#e-15 .replaces').textContent`); !strings.Contains(got, "#1, #5, #7") {
		t.Errorf("the compaction says %q", got)
	}
	b.step(5*time.Second, chromedp.Click(chromedp.CSS(`#e-5 details.reasoning summary`)))
	b.shot("transcript")
	b.open("/s/s-7f3c/e/15", ".trace-grid")
	b.shot("event-trace")

	// Lineage: walk from the root to its subagent.
	b.open("/s/s-7f3c/lineage", ".tree")
	b.shot("lineage")
	b.step(20*time.Second, chromedp.Click(chromedp.CSS(`.tree a[href="/s/s-sub1"]`)), chromedp.WaitVisible(chromedp.CSS(`#e-1`)))
	if got := eval[string](b, `document.querySelector('.session-head .facts').textContent`); !strings.Contains(got, "subagent") || !strings.Contains(got, "s-7f3c") {
		t.Errorf("the child's head says %q", got)
	}
	b.check("child")

	// Hostile text stays text.
	b.open(sessionURL(hostileID), "#e-1")
	if n := eval[int](b, `document.querySelectorAll('#events script, #events img, #events iframe, #events svg').length`); n != 0 {
		t.Errorf("hostile markup became %d elements", n)
	}
	b.shot("hostile")

	// Live: an event appended now appears within 2 s.
	b.open("/s/live-in-browser", "#e-2")
	b.waitFor(5*time.Second, `document.getElementById('live-status').dataset.state === 'live'`)
	start := time.Now()
	if _, err := h.Append(testContext(t), []dshq.Event{userEvent(3, "appeared while you watched")}); err != nil {
		t.Fatal(err)
	}
	b.waitFor(2*time.Second, `document.getElementById('e-3') !== null`)
	t.Logf("append → shown in the browser: %v", time.Since(start))
	if got := eval[string](b, `document.querySelector('#e-3 .prose').textContent`); got != "appeared while you watched" {
		t.Errorf("the live event reads %q", got)
	}
	if got := eval[string](b, `document.querySelector('.session-head [data-count]').textContent`); got != "4" {
		t.Errorf("the live count is %q", got)
	}
	b.check("live")
	b.shot("live")

	// Dark mode.
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	b.open("/s/s-7f3c", "#e-15")
	b.shot("transcript-dark")
	b.open("/", "#session-rows tr")
	b.shot("sessions-dark")

	// The UI stops serving its live streams: the page says the connection
	// dropped.
	b.open("/s/live-in-browser", "#e-3")
	b.waitFor(5*time.Second, `document.getElementById('live-status').dataset.state === 'live'`)
	s.ui.Close()
	b.waitFor(10*time.Second, `document.getElementById('live-status').dataset.state === 'down'`)
	if got := eval[string](b, `document.getElementById('live-status').textContent`); !strings.Contains(got, "Connection lost") {
		t.Errorf("the status says %q", got)
	}
	b.shot("disconnected")
}

// updateScreenshots makes the browser test write its page screenshots into
// docs/img (go test ./web -run TestBrowserWalksTheSessionPage -update-screenshots),
// so docs/ui.md shows the pages as they are.
var updateScreenshots = flag.Bool("update-screenshots", false, "write the session page browser test's screenshots into docs/img")

// uiShots are the pages docs/ui.md shows, at desktop and phone widths.
var uiShotSizes = []struct {
	name          string
	width, height int64
}{{"desktop", 1280, 860}, {"phone", 420, 860}}

// docShot saves what the window shows of the page at each width, as
// dir/ui-name-desktop.png and ui-name-phone.png (and into docs/img with
// -update-screenshots).
// On a phone the page is scrolled to its main part (main, a selector)
// when it has one.
func (b *browse) docShot(name, main string) {
	b.t.Helper()
	for _, sz := range uiShotSizes {
		b.step(20*time.Second, chromedp.EmulateViewport(sz.width, sz.height))
		scroll := `window.scrollTo(0, 0)`
		if main != "" && sz.name == "phone" {
			scroll = `document.querySelector(` + strconv.Quote(main) + `).scrollIntoView()`
		}
		b.step(5*time.Second, chromedp.Evaluate[chromedp.Void](scroll))
		shot := "ui-" + name + "-" + sz.name
		b.view(shot)
		if *updateScreenshots {
			png, err := os.ReadFile(filepath.Join(b.dir, shot+".png"))
			if err == nil {
				err = os.WriteFile(filepath.Join("..", "docs", "img", shot+".png"), png, 0o644)
			}
			if err != nil {
				b.t.Fatal(err)
			}
		}
	}
	b.step(20*time.Second, chromedp.EmulateViewport(1280, 860))
}

// TestBrowserWalksTheSessionPage walks the conversation view of a Claude
// Code transcript and a Codex rollout of the repository's fixtures, the
// timeline of a session with subagents, the header's totals beside
// `dshq usage session`'s, and live events joining the conversation; it
// saves each page at desktop and phone widths.
func TestBrowserWalksTheSessionPage(t *testing.T) {
	chromium(t)
	s := newStack(t)
	seedHarnesses(t, s)
	seedCorpus(t, s)
	seedUsage(t, s)
	b := &browse{t: t, ctx: newBrowser(t, 1280, 860), base: strings.TrimSuffix(s.srv.URL, "/"), dir: screenshotDir(t)}

	// Claude Code: calls paired with their results, the duplicate
	// tool/call folded into its call, bookkeeping folded and closed.
	b.open(sessionURL(ccTurns), "#e-10")
	for _, c := range []struct{ call, result string }{{"toolu_read", "e-10"}, {"toolu_grep", "e-11"}} {
		if !eval[bool](b, fmt.Sprintf(`document.querySelector('.call[data-call-id="%s"] > .call-results > .call-result#%s') !== null`, c.call, c.result)) {
			t.Errorf("the result %s is not under its call %s", c.result, c.call)
		}
	}
	if !eval[bool](b, `document.querySelector('#e-11').classList.contains('is-failed') && document.querySelector('.call[data-call-id="toolu_grep"]').classList.contains('is-failed')`) {
		t.Error("the failed grep is not marked failed")
	}
	for _, seq := range []int{7, 8} {
		if !eval[bool](b, fmt.Sprintf(`document.querySelector('article#e-%d') === null && document.querySelector('.call > .anchor#e-%d') !== null`, seq, seq)) {
			t.Errorf("the duplicate tool/call #%d is not folded into its call", seq)
		}
	}
	if n := eval[int](b, `[...document.querySelectorAll('details.bk')].filter((d) => !d.open).length`); n < 4 {
		t.Errorf("%d closed bookkeeping folds, want 4", n)
	}
	if !eval[bool](b, `!document.getElementById('e-0').checkVisibility()`) {
		t.Error("the file-history snapshot #0 is shown, not folded")
	}
	b.step(5*time.Second, chromedp.Click(chromedp.CSS(`.turn:first-child details.bk > summary`)))
	if !eval[bool](b, `document.getElementById('e-0').checkVisibility()`) {
		t.Error("the fold does not expand")
	}
	b.docShot("conversation", "#events")

	// The filter by type narrows the page to tool results.
	b.step(20*time.Second, chromedp.SetValue(chromedp.CSS(`.view-filters input[name="type"]`), "tool/result"),
		chromedp.Click(chromedp.CSS(`.view-filters button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.pages .muted`)))
	b.check("filtered")
	if got := eval[string](b, `location.search`); got != "?type=tool%2Fresult" {
		t.Errorf("the filter's URL is %q", got)
	}
	if !eval[bool](b, `document.getElementById('e-10') !== null && document.getElementById('e-11') !== null && document.getElementById('e-3') === null && document.getElementById('e-4') === null`) {
		t.Errorf("the type filter shows %q", eval[[]string](b, `[...document.querySelectorAll('[data-seq]')].map((e) => e.id)`))
	}

	// Codex: the same pairing.
	b.open(sessionURL(codexID), "#e-13")
	if n := eval[int](b, `document.querySelectorAll('.call > .call-results > .call-result').length`); n < 3 {
		t.Errorf("%d Codex calls have their result under them, want 3", n)
	}
	if !eval[bool](b, `document.querySelector('article#e-11') === null && document.querySelector('.call > .anchor#e-11') !== null`) {
		t.Error("the Codex tool/call #11 is not folded into its call")
	}
	if n := eval[int](b, `document.querySelectorAll('details.bk').length`); n < 2 {
		t.Errorf("%d bookkeeping folds in the rollout", n)
	}

	// The totals are `dshq usage session`'s.
	u := cliSessionUsage(t, s, usageParent)
	b.open(sessionURL(usageParent), ".totals")
	if got := eval[string](b, `document.querySelector('[data-total="total-tokens"]').textContent`); got != numfmt.Thousands(u.TotalTokens) {
		t.Errorf("the header says %s tokens, dshq usage session %d", got, u.TotalTokens)
	}
	if got := eval[string](b, `document.querySelector('[data-total="cost"]').textContent`); !strings.HasPrefix(got, usageCost(u)) || !strings.Contains(got, "no price for claude-fictional-9") {
		t.Errorf("the header's cost says %q, dshq usage session %s", got, usageCost(u))
	}

	// The timeline: the session's rows and its two subagents' lanes, bars
	// drawn in order, each a link to its event.
	b.open(sessionURL(usageParent)+"/timeline", ".tl-row rect.tl-bar")
	if n := eval[int](b, `document.querySelectorAll('.tl-row[data-kind="lane"]').length`); n != 2 {
		t.Errorf("%d subagent lanes, want 2", n)
	}
	if !eval[bool](b, `[...document.querySelectorAll('rect.tl-bar')].every((r) => r.getBoundingClientRect().width > 0 && r.getBoundingClientRect().height > 0)`) {
		t.Error("a bar is not drawn")
	}
	if !eval[bool](b, `(() => { const x = (s) => document.querySelector('.tl-row[data-kind="turn"][data-seq="' + s + '"] rect.tl-bar').getBoundingClientRect().left; return x(9) > x(0); })()`) {
		t.Error("turn 2's bar is not after turn 1's")
	}
	b.docShot("timeline", ".tl-summary")
	b.step(20*time.Second, chromedp.Click(chromedp.CSS(`.tl-row[data-kind="tool"] svg a`)), chromedp.WaitVisible(chromedp.CSS(`#e-3`)))
	b.waitFor(5*time.Second, `location.pathname === '/s/`+usageParent+`' && location.hash === '#e-3'`)
	b.check("timeline click")

	// The other pages, for docs/ui.md.
	b.open("/", "#session-rows tr")
	b.docShot("sessions", "")
	b.open(sessionURL(ccTurns)+"/e/11", ".trace-grid")
	b.docShot("event", "")
	b.open("/search?q=retry", ".hit")
	b.docShot("search", "")
	b.open("/s/s-7f3c/lineage", ".tree")
	b.docShot("lineage", ".lineage")
	b.open("/usage?tz=UTC", "#chart-tokens svg rect")
	b.docShot("usage", "")

	// Live: events appended while the conversation is open join it.
	h := s.liveSession(t, "live-conv-browser", 0)
	var evs []dshq.Event
	for _, l := range liveTurn[:3] {
		evs = append(evs, event(l))
	}
	gen, err := h.Append(testContext(t), evs)
	if err != nil {
		t.Fatal(err)
	}
	s.waitGeneration(t, gen)
	b.open("/s/live-conv-browser", `.call[data-call-id="c1"]`)
	b.waitFor(5*time.Second, `document.getElementById('live-status').dataset.state === 'live'`)
	evs = evs[:0]
	for _, l := range liveTurn[3:] {
		evs = append(evs, event(l))
	}
	if _, err := h.Append(testContext(t), evs); err != nil {
		t.Fatal(err)
	}
	b.waitFor(10*time.Second, `document.querySelector('footer.turn-end#e-6') !== null`)
	for what, cond := range map[string]string{
		"the result under its call":          `document.querySelector('.call[data-call-id="c1"] > .call-results > .call-result#e-5') !== null`,
		"the tool/call folded into its call": `document.querySelector('.call[data-call-id="c1"] > .anchor#e-3') !== null && document.querySelector('article#e-3') === null`,
		"the step line in a fold":            `document.querySelector('.turn-items > details.bk .bk-items > article#e-4') !== null`,
		"the turn closed":                    `document.querySelector('section.turn > footer.turn-end#e-6') !== null`,
	} {
		if !eval[bool](b, cond) {
			t.Errorf("live: %s is not so", what)
		}
	}
	b.check("live conversation")
}

// TestBrowserSessionListAtPhoneWidth opens the list at 420 px: every
// session's workspace, created and last activity show, within the
// window, with nothing to scroll sideways; the text stacks name CJK fonts;
// the header's status says the feed is connected, not that a session is
// live.
func TestBrowserSessionListAtPhoneWidth(t *testing.T) {
	chromium(t)
	s := newStack(t)
	seedCorpus(t, s)
	b := &browse{t: t, ctx: newBrowser(t, 420, 900), base: strings.TrimSuffix(s.srv.URL, "/"), dir: screenshotDir(t)}
	// A window is at least 500 px wide: the page is emulated at 420.
	if _, err := chromedp.Call(b.ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
		Width: 420, Height: 900, DeviceScaleFactor: 1, Mobile: true}); err != nil {
		t.Fatal(err)
	}
	b.open("/?sort=activity", "#session-rows tr")
	if w := eval[int](b, `window.innerWidth`); w > 420 {
		t.Fatalf("the window is %d px wide, want 420", w)
	}
	b.waitFor(5*time.Second, `document.getElementById('live-status').dataset.state === 'live'`)
	if over := eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`); over > 0 {
		t.Errorf("the page is %d px wider than the window", over)
	}
	cut := eval[[]string](b, `(() => {
		const out = [];
		for (const tr of document.querySelectorAll('#session-rows tr')) {
			for (const cls of ['c-ws', 'c-created', 'c-activity', 'c-tokens', 'c-calls']) {
				const td = tr.querySelector('td.' + cls);
				const r = td && td.getBoundingClientRect();
				if (!r || r.width === 0 || r.height === 0 || r.left < 0 || r.right > window.innerWidth + 0.5 ||
					getComputedStyle(td).display === 'none' || td.scrollWidth > td.clientWidth + 1) {
					out.push(tr.dataset.sid + ' ' + cls);
				}
			}
		}
		return out;
	})()`)
	if len(cut) > 0 {
		t.Errorf("at 420 px these cells are hidden or cut: %q", cut)
	}
	if got := eval[string](b, `document.querySelector('#session-rows tr td.c-created').textContent.trim()`); !strings.Contains(got, "2026") {
		t.Errorf("the created cell reads %q", got)
	}
	for _, sel := range []string{"body", ".s-sub .mono"} {
		fam := eval[string](b, fmt.Sprintf(`getComputedStyle(document.querySelector(%q)).fontFamily`, sel))
		for _, want := range []string{"PingFang SC", "Microsoft YaHei", "Noto Sans CJK SC", "Source Han Sans SC"} {
			if !strings.Contains(fam, want) {
				t.Errorf("%s's fonts %q name no %s", sel, fam, want)
			}
		}
	}
	status := eval[string](b, `document.getElementById('live-status').textContent`)
	if status != "Feed connected" {
		t.Errorf("the header's status says %q, want it to say the feed is connected", status)
	}
	if bg := eval[string](b, `getComputedStyle(document.getElementById('live-status')).backgroundColor`); bg != "rgba(0, 0, 0, 0)" {
		t.Errorf("the feed's status wears a pill (background %s), like a live session's badge", bg)
	}
	b.check("phone list")
	b.shot("sessions-phone")

	// A live row's summary columns follow its log.
	h := s.liveSession(t, "live-phone", 1)
	b.open("/", `tr[data-sid="live-phone"]`)
	b.waitFor(5*time.Second, `document.querySelector('tr[data-sid="live-phone"] [data-live]:not([hidden])') !== null`)
	if _, err := h.Append(testContext(t), []dshq.Event{{Type: "turn/start", Seq: 1, Time: time.Now().UnixMilli(), Data: []byte(`{"turn":1}`)}}); err != nil {
		t.Fatal(err)
	}
	b.waitFor(10*time.Second, `document.querySelector('tr[data-sid="live-phone"] [data-turns]').textContent.trim() === '1'`)
	b.check("live row")
}
