package web

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/dshq/dshq"
)

// tlRowsOf returns the kind and classes, session (less root), label and
// duration of every timeline row.
func tlRowsOf(t *testing.T, body, root string) []string {
	t.Helper()
	re := regexp.MustCompile(`(?s)<div class="tl-row tl-(lane|turn|request|tool)([^"]*)" role="row" data-kind="[a-z]+" data-session="([^"]+)".*?<span class="tl-name">([^<]*)</span>.*?<span class="tl-dur" role="cell">([^<]*)`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		out = append(out, strings.Join([]string{m[1] + strings.ReplaceAll(m[2], " ", "."), strings.TrimPrefix(m[3], root), m[4], strings.TrimSpace(m[5])}, " | "))
	}
	return out
}

func TestTimelineDrawsTurnsRequestsAndCallsWithSubagentsAsNestedLanes(t *testing.T) {
	s := newStack(t)
	seedUsage(t, s)
	body := s.page(t, sessionURL(usageParent)+"/timeline")
	want := []string{
		// Turn 1 ends at its last result, not at the turn/end the converter
		// wrote with the next prompt 15 h later.
		"turn.tl-d0 |  | Turn 1 | 6.0 s",
		"request.tl-d0.tl-in |  | claude-sonnet-4-5-20250929 | 3.0 s",
		"tool.tl-d0.tl-in |  | Task | 3.0 s",
		// The subagents, in the order they began, after the call that
		// started them.
		"lane.tl-d1 | -agent-sub1 | " + usageParent + "-agent-sub1 | 1.0 s",
		"turn.tl-d1.is-open | -agent-sub1 | Turn 1 | 1.0 s",
		"request.tl-d1.tl-in | -agent-sub1 | claude-haiku-4-5-20251001 | 1.0 s",
		"lane.tl-d1 | -agent-inl1 | " + usageParent + "-agent-inl1 | 0 ms",
		"request.tl-d1 | -agent-inl1 | claude-sonnet-4-5-20250929 | 0 ms",
		// The last turn has no end in the log (its closer is synthesized).
		"turn.tl-d0.is-open |  | Turn 2 | 1 min 00 s",
		"request.tl-d0.tl-in |  | claude-opus-4-6 | 1 min 00 s",
	}
	got := tlRowsOf(t, body, usageParent)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the timeline's rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	mustContain(t, "timeline", body,
		"2 turns · 2 model requests · 1 tool call · 2 subagents in nested lanes",
		// 15 h between the turns are drawn short.
		"1 idle gap over 1 min 00 s drawn short", `<rect class="tl-gap"`,
		// Each bar links to its event in the conversation; a lane to its
		// own timeline.
		`<a href="/s/`+usageParent+`?page=0#e-3"><rect class="tl-bar"`,
		`<a href="/s/`+usageParent+`-agent-sub1/timeline"><rect class="tl-bar"`,
		`aria-current="page">Timeline</a>`)
	// The track is linear over the 8 s of turn 1 and the 60 s of turn 2,
	// the gap between them 16 of its 1000 units: turn 2 starts at
	// 8/68 × 984 + 16.
	if m := regexp.MustCompile(`#e-9"><rect class="tl-bar" x="([0-9.]+)"`).FindStringSubmatch(body); m == nil || m[1] != "131.8" {
		t.Errorf("turn 2's bar is at %v, want 131.8 of 1000", m)
	}
	// The conversation links to it.
	mustContain(t, "conversation", s.page(t, sessionURL(usageParent)), `href="/s/`+usageParent+`/timeline">Timeline</a>`)
	// A page past the end is a 404.
	if code, _, _ := s.get(t, sessionURL(usageParent)+"/timeline?page=3"); code != http.StatusNotFound {
		t.Errorf("page 3 of a one-page timeline: %d", code)
	}
}

func TestTimelineMarksFailedCallsAndOpenOnes(t *testing.T) {
	s := newStack(t)
	seedHarnesses(t, s)
	body := s.page(t, sessionURL(ccTurns)+"/timeline")
	got := strings.Join(tlRowsOf(t, body, ccTurns), "\n")
	for _, w := range []string{"tool.tl-d0.tl-in.is-failed |  | Grep | 900 ms", "tool.tl-d0.tl-in |  | Read | 800 ms",
		"tool.tl-d0.tl-in.is-open |  | Edit |"} {
		if !strings.Contains(got, w) {
			t.Errorf("no row %q in\n%s", w, got)
		}
	}
	body = s.page(t, sessionURL(codexID)+"/timeline")
	if n := strings.Count(body, `data-kind="tool"`); n < 4 {
		t.Errorf("the Codex rollout's timeline has %d tool rows", n)
	}
}

func TestTimelineAxisDrawsIdleGapsShort(t *testing.T) {
	spans := []*tlSpan{{Start: 0, End: 10_000}, {Start: 2_000, End: 4_000}, {Start: 3_600_000, End: 3_610_000}}
	ax := newAxis(spans)
	if len(ax.gaps) != 1 || ax.gaps[0].from != 10_000 || ax.gaps[0].to != 3_600_000 {
		t.Fatalf("gaps %+v", ax.gaps)
	}
	if x := ax.pos(10_000); x < 490 || x > 495 {
		t.Errorf("the first stretch ends at %.1f, want about (1000-16)/2", x)
	}
	if x := ax.pos(3_600_000); x < 505 || x > 510 {
		t.Errorf("the second begins at %.1f", x)
	}
	for _, tm := range []int64{0, 5_000, 10_000, 3_605_000, 3_610_000} {
		if back := ax.at(ax.pos(tm)); back < tm-50 || back > tm+50 {
			t.Errorf("at(pos(%d)) = %d", tm, back)
		}
	}
	short := newAxis([]*tlSpan{{Start: 0, End: 10_000}, {Start: 40_000, End: 50_000}})
	if len(short.gaps) != 0 {
		t.Errorf("a 30 s pause is drawn short: %+v", short.gaps)
	}
}

func TestTimelineGrowsWithTheLog(t *testing.T) {
	s := newStack(t)
	h := s.liveSession(t, "tl-live", 0)
	ctx := testContext(t)
	appendLines := func(lines []string) {
		t.Helper()
		var evs []dshq.Event
		for _, l := range lines {
			evs = append(evs, event(l))
		}
		gen, err := h.Append(ctx, evs)
		if err != nil {
			t.Fatal(err)
		}
		s.waitGeneration(t, gen)
	}
	appendLines(liveTurn[:3])
	got := strings.Join(tlRowsOf(t, s.page(t, "/s/tl-live/timeline"), "tl-live"), "\n")
	for _, w := range []string{"turn.tl-d0.is-open |  | Turn 1 | 100 ms", "tool.tl-d0.tl-in.is-open |  | ls | 0 ms"} {
		if !strings.Contains(got, w) {
			t.Errorf("before the result: no %q in\n%s", w, got)
		}
	}
	// The kept builder reads only what was stored since, and its open
	// spans close.
	appendLines(liveTurn[3:])
	got = strings.Join(tlRowsOf(t, s.page(t, "/s/tl-live/timeline"), "tl-live"), "\n")
	want := strings.Join([]string{
		"turn.tl-d0 |  | Turn 1 | 300 ms",
		"request.tl-d0.tl-in |  | m | 99 ms",
		"tool.tl-d0.tl-in |  | ls | 100 ms",
	}, "\n")
	if got != want {
		t.Errorf("after the turn ended:\n%s\nwant:\n%s", got, want)
	}
}
