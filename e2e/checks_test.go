package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/e2e/internal/simfacts"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
)

// checkCorpus checks the query API (as the trusted user) and, unless
// toolsOf is nil, the tools (as toolsOf's client of each run's caller: a
// harness's credential) against what the simulators wrote.
func checkCorpus(t *testing.T, ctx context.Context, q *query.Client, toolsOf func(run int, caller string) *toolservice.Client, c *corpus) {
	t.Run("sessions.list holds exactly the sessions written, with their headers", func(t *testing.T) {
		page, err := q.ListSessions(ctx, dshqListAll)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range page.Items {
			got = append(got, r.Header.ID)
			if want, ok := c.headers[r.Header.ID]; ok && !reflect.DeepEqual(r.Header, want) {
				t.Errorf("header of %s:\n got %+v\nwant %+v", r.Header.ID, r.Header, want)
			}
			if !r.Persisted || r.Live {
				t.Errorf("%s: persisted %v live %v, want persisted and not live", r.Header.ID, r.Persisted, r.Live)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, c.ids()) {
			t.Fatalf("sessions:\n got %v\nwant %v", got, c.ids())
		}
	})

	t.Run("sessions.read returns every record byte for byte", func(t *testing.T) {
		for _, id := range c.ids() {
			s := c.sessions[id]
			r, err := q.ReadSession(ctx, dshq.SessionReadRequest{SessionID: id, Limit: dshq.MaxListLimit})
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			if r.InheritedEventCount != s.InheritedEventCount || len(r.Events) != len(s.Events) {
				t.Fatalf("%s: inherited %d, %d events; want %d, %d", id, r.InheritedEventCount, len(r.Events), s.InheritedEventCount, len(s.Events))
			}
			for i, e := range r.Events {
				if string(e.Raw) != string(s.Events[i]) {
					t.Fatalf("%s seq %d:\n got %s\nwant %s", id, i, e.Raw, s.Events[i])
				}
			}
		}
	})

	t.Run("events.list places forks, compactions and tool results on their surfaces", func(t *testing.T) {
		for _, id := range c.ids() {
			page, err := q.ListEvents(ctx, dshq.SessionReadRequest{SessionID: id, Limit: dshq.MaxListLimit})
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			want := expectedSurface(c.sessions[id])
			if len(page.Items) != len(want) {
				t.Fatalf("%s: %d events, want %d", id, len(page.Items), len(want))
			}
			for i, e := range page.Items {
				if e.Seq != int64(i) || e.Surface != want[i] {
					t.Errorf("%s: event %d is seq %d %s %s, want %s", id, i, e.Seq, e.Type, e.Surface, want[i])
				}
			}
		}
	})

	t.Run("sessions.search finds each English and Chinese phrase in exactly the sessions holding it", func(t *testing.T) {
		for _, phrase := range c.phrases() {
			page, err := q.SearchSessions(ctx, dshq.SessionSearchRequest{Query: phrase, Limit: dshq.MaxSearchLimit})
			if err != nil {
				t.Fatalf("%q: %v", phrase, err)
			}
			var got []string
			for _, h := range page.Items {
				got = append(got, h.Header.ID)
				if s, ok := c.sessions[h.Header.ID]; ok && !slices.Contains(s.Phrases[phrase], h.BestMatch.Seq) {
					t.Errorf("%q: best match of %s is seq %d, not one of %v", phrase, h.Header.ID, h.BestMatch.Seq, s.Phrases[phrase])
				}
			}
			slices.Sort(got)
			if want := c.holding(phrase, ""); !slices.Equal(got, want) {
				t.Errorf("%q: sessions %v, want %v", phrase, got, want)
			}
		}
	})

	t.Run("events.search finds each phrase at exactly the seqs holding it", func(t *testing.T) {
		for _, id := range c.ids() {
			for phrase, seqs := range c.sessions[id].Phrases {
				page, err := q.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: id, Query: phrase, Limit: dshq.MaxSearchLimit})
				if err != nil {
					t.Fatalf("%s %q: %v", id, phrase, err)
				}
				var got []int64
				for _, h := range page.Items {
					got = append(got, h.Seq)
				}
				if !slices.Equal(sorted(got), sorted(seqs)) {
					t.Errorf("%s %q: seqs %v, want %v", id, phrase, sorted(got), sorted(seqs))
				}
			}
		}
	})

	t.Run("sessions.trace follows forks and subagents", func(t *testing.T) {
		for i := range c.runs {
			root, fork, sub := c.role(i, simfacts.RoleRoot), c.role(i, simfacts.RoleFork), c.role(i, simfacts.RoleSubagent)
			tr, err := q.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: root.ID})
			if err != nil {
				t.Fatal(err)
			}
			var desc []string
			for _, d := range tr.Descendants {
				desc = append(desc, d.Session.Header.ID)
			}
			slices.Sort(desc)
			if want := []string{fork.ID, sub.ID}; !tr.Complete || len(tr.Ancestors) != 0 || !slices.Equal(desc, want) {
				t.Errorf("trace of %s: complete %v, %d ancestors, descendants %v; want a root with %v", root.ID, tr.Complete, len(tr.Ancestors), desc, want)
			}
			for _, child := range []*simfacts.Session{fork, sub} {
				tr, err := q.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: child.ID})
				if err != nil {
					t.Fatal(err)
				}
				if !tr.Complete || len(tr.Ancestors) != 1 || tr.Ancestors[0].Header.ID != root.ID || tr.Root == nil || tr.Root.Header.ID != root.ID {
					t.Errorf("trace of %s: %+v; want ancestor and root %s", child.ID, tr, root.ID)
				}
			}
		}
	})

	t.Run("events.trace follows the compaction and the tool call", func(t *testing.T) {
		for i := range c.runs {
			root := c.role(i, simfacts.RoleRoot)
			cp, tc := root.Compaction, root.ToolCall
			tr := traceEvent(t, ctx, q, root.ID, cp.CheckpointSeq)
			if !slices.Equal(sorted(tr.SourceEventSeqs), sorted(cp.SourceEventSeqs)) || !slices.Equal(sorted(tr.ReplacedEventSeqs), sorted(cp.ShadowedSeqs)) || tr.ReplacedBy != nil {
				t.Errorf("%s checkpoint %d: sources %v replaced %v by %v; want sources %v replaced %v", root.ID, cp.CheckpointSeq,
					tr.SourceEventSeqs, tr.ReplacedEventSeqs, tr.ReplacedBy, cp.SourceEventSeqs, cp.ShadowedSeqs)
			}
			for _, seq := range cp.ShadowedSeqs {
				tr := traceEvent(t, ctx, q, root.ID, seq)
				if tr.ReplacedBy == nil || *tr.ReplacedBy != cp.CheckpointSeq || !slices.Equal(tr.ReplacementChain, []int64{cp.CheckpointSeq}) || tr.Target.Surface != dshq.SurfaceShadowed {
					t.Errorf("%s seq %d: replaced by %v chain %v surface %s; want %d", root.ID, seq, tr.ReplacedBy, tr.ReplacementChain, tr.Target.Surface, cp.CheckpointSeq)
				}
			}
			tr = traceEvent(t, ctx, q, root.ID, tc.ResultSeq)
			if !slices.Equal(tr.SourceEventSeqs, []int64{tc.CallSeq}) {
				t.Errorf("%s tool result %d cites %v, want [%d]", root.ID, tc.ResultSeq, tr.SourceEventSeqs, tc.CallSeq)
			}
			tr = traceEvent(t, ctx, q, root.ID, tc.CallSeq)
			if !slices.Equal(tr.DerivedEventSeqs, []int64{tc.ResultSeq}) {
				t.Errorf("%s tool call %d derives %v, want [%d]", root.ID, tc.CallSeq, tr.DerivedEventSeqs, tc.ResultSeq)
			}
			// In the fork the inherited tool result is current, never replaced.
			fork := c.role(i, simfacts.RoleFork)
			tr = traceEvent(t, ctx, q, fork.ID, tc.ResultSeq)
			if tr.ReplacedBy != nil || tr.Target.Surface != dshq.SurfaceCurrent || !slices.Equal(tr.SourceEventSeqs, []int64{tc.CallSeq}) {
				t.Errorf("%s inherited tool result: %+v", fork.ID, tr)
			}
		}
	})

	t.Run("sessions.titles returns the titles written", func(t *testing.T) {
		got, err := q.ReadTitles(ctx, dshq.SessionTitlesRequest{SessionIDs: c.ids()})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Items) != len(c.ids()) {
			t.Fatalf("%d titles for %d sessions", len(got.Items), len(c.ids()))
		}
		for _, it := range got.Items {
			want := c.sessions[it.SessionID].Title
			if it.Status != "fulfilled" || it.Value == nil {
				t.Errorf("%s: %+v", it.SessionID, it)
				continue
			}
			title := ""
			if it.Value.Title != nil {
				title = it.Value.Title.Title
			}
			if title != want {
				t.Errorf("%s: title %q, want %q", it.SessionID, title, want)
			}
		}
	})

	if toolsOf == nil {
		return
	}
	t.Run("the tools answer a harness within its own workspace", func(t *testing.T) {
		for i := range c.runs {
			root, fork, sub := c.role(i, simfacts.RoleRoot), c.role(i, simfacts.RoleFork), c.role(i, simfacts.RoleSubagent)
			tc := toolsOf(i, sub.ID)
			for phrase := range root.Phrases {
				var want []string
				for _, id := range c.holding(phrase, c.runs[i].Cwd) {
					if id != sub.ID {
						want = append(want, "Session "+id+" — ")
					}
				}
				text := callTool(t, ctx, tc, tools.NameSessionSearch, map[string]any{"query": phrase})
				wantCount := fmt.Sprintf("Session search results (%d):", len(want))
				if !strings.HasPrefix(text, wantCount) || !containsAll(text, want) {
					t.Errorf("%s searches %q:\n%s\nwant %s with %v", sub.ID, phrase, text, wantCount, want)
				}
			}
			for j := range c.runs {
				if j == i {
					continue
				}
				for phrase := range c.role(j, simfacts.RoleRoot).Phrases {
					if text := callTool(t, ctx, tc, tools.NameSessionSearch, map[string]any{"query": phrase}); text != "No prior session matches found." {
						t.Errorf("%s found %q of another workspace:\n%s", sub.ID, phrase, text)
					}
				}
			}
			text := callTool(t, ctx, tc, tools.NameSessionTrace, map[string]any{"session_id": root.ID})
			if !containsAll(text, []string{"Session " + root.ID + " — ", "- " + fork.ID + " — ", "- " + sub.ID + " — "}) {
				t.Errorf("%s traces %s:\n%s", sub.ID, root.ID, text)
			}
			cp := root.Compaction
			text = callTool(t, ctx, tc, tools.NameSessionEventTrace, map[string]any{"session_id": root.ID, "seq": cp.CheckpointSeq})
			if !strings.Contains(text, "Events replaced by target: "+seqText(cp.ShadowedSeqs)) {
				t.Errorf("%s traces checkpoint %d:\n%s", sub.ID, cp.CheckpointSeq, text)
			}
			text = callTool(t, ctx, tc, tools.NameSessionEventRead, map[string]any{"session_id": root.ID, "seq": root.ToolCall.ResultSeq})
			if !containsAll(text, []string{fmt.Sprintf(`"seq": %d,`, root.ToolCall.ResultSeq), `"toolCallId": "call_1"`}) {
				t.Errorf("%s reads the tool result:\n%s", sub.ID, text)
			}
		}
	})
}

func traceEvent(t *testing.T, ctx context.Context, q *query.Client, id string, seq int64) *dshq.EventTrace {
	t.Helper()
	tr, err := q.TraceEvent(ctx, dshq.EventTraceRequest{SessionID: id, Seq: seq})
	if err != nil {
		t.Fatalf("trace %s seq %d: %v", id, seq, err)
	}
	return tr
}

// callTool calls a tool and returns its text; a tool error fails the test.
func callTool(t *testing.T, ctx context.Context, c *toolservice.Client, name string, args map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(args)
	r, err := c.Call(ctx, name, b)
	if err != nil {
		t.Fatalf("%s %s: %v", name, b, err)
	}
	if r.IsError {
		t.Fatalf("%s %s: %s", name, b, r.Text)
	}
	return r.Text
}

func containsAll(text string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(text, p) {
			return false
		}
	}
	return true
}

func seqText(seqs []int64) string {
	parts := make([]string, len(seqs))
	for i, s := range seqs {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ", ")
}
