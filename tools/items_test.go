package tools_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolstest"
)

// onPipeline runs fn against the real pipeline over the full corpus with a
// spy in front of it.
func onPipeline(t *testing.T, fn func(t *testing.T, tl *tools.Tools, rec *spy)) {
	rec := newSpy(newService(t, fullCorpus))
	fn(t, newTools(t, rec), rec)
}

type calls interface{ Calls() []served }

// opsOf returns the ops of the recorded calls.
func opsOf(f calls) []string {
	var ops []string
	for _, c := range f.Calls() {
		ops = append(ops, c.Op)
	}
	return ops
}

func countOp(f calls, op string) int {
	n := 0
	for _, o := range opsOf(f) {
		if o == op {
			n++
		}
	}
	return n
}

// The caller rules (docs/tools.md#workspace-authorization): a missing agent, a
// caller without cwd, a target in another workspace.
func TestItem37CallerRules(t *testing.T) {
	item37(t, newTools(t, newService(t, fullCorpus)))
}

func item37(t *testing.T, tl *tools.Tools) {
	for _, tc := range []struct {
		name, caller, tool, args string
		code                     dshq.Code
		text                     string
	}{
		{"no caller fails with the missing-agent code, saying none was named", "", tools.NameSessionTrace, `{}`,
			dshq.CodeToolMissingAgent, "Error: session query tools require an agent-bound caller: no caller session is named"},
		{"a caller the corpus does not hold is no agent, and the text says so", "ghost", tools.NameSessionTrace, `{}`,
			dshq.CodeToolMissingAgent, "Error: session query tools require an agent-bound caller: the caller session is not stored (or not projected yet)"},
		{"a caller without cwd cannot search across sessions", "n-caller", tools.NameSessionSearch, `{"query":"retry budget"}`,
			dshq.CodeToolUnauthorized, "Error: cross-session search is unavailable because the caller session has no workspace"},
		{"a caller without cwd cannot trace another cwd-less session", "n-caller", tools.NameSessionTrace, `{"session_id":"n-nocwd"}`,
			dshq.CodeToolUnauthorized, "Error: session target is outside the caller workspace"},
		{"a cross-cwd direct target is unauthorized without its id", "s-caller", tools.NameSessionEventRead, `{"session_id":"b-secret","seq":1}`,
			dshq.CodeToolUnauthorized, "Error: session target is outside the caller workspace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, call(t, tl, tc.caller, tc.tool, tc.args), tc.code, tc.text)
		})
	}
	t.Run("a caller without cwd can trace itself", func(t *testing.T) {
		r := call(t, tl, "n-caller", tools.NameSessionTrace, `{}`)
		if r.IsError || !strings.HasPrefix(r.Text, "Session n-caller — untitled\n") {
			t.Fatalf("got %+v", r)
		}
	})
	t.Run("a caller without cwd can search its own events", func(t *testing.T) {
		r := call(t, tl, "n-caller", tools.NameSessionEventSearch, `{"query":"retry budget"}`)
		if r.IsError || !strings.Contains(r.Text, "Event search results (1):") {
			t.Fatalf("got %+v", r)
		}
	})
	t.Run("stage 1 runs before the caller check", func(t *testing.T) {
		wantError(t, call(t, tl, "", tools.NameSessionTrace, `{"session_id":7}`), dshq.CodeInvalidArgs,
			"Error: invalid arguments: session_id: must be a string")
	})
}

// Parent filters that name hidden or missing parents answer alike
// (docs/tools.md#parent-filters).
func TestItem38ParentGuesses(t *testing.T) {
	onPipeline(t, func(t *testing.T, tl *tools.Tools, rec *spy) {
		guess := func(parents string) tools.Result {
			return call(t, tl, "s-caller", tools.NameSessionSearch, `{"query":"retry budget","parent_session_ids":`+parents+`}`)
		}
		t.Run("hidden and missing parents answer byte-identically without searching", func(t *testing.T) {
			rec.reset()
			hidden, missing := guess(`["b-secret"]`), guess(`["no-such-session"]`)
			if hidden != missing || hidden.Text != "No prior session matches found." {
				t.Fatalf("hidden %+v, missing %+v", hidden, missing)
			}
			if countOp(rec, "sessions.search") != 0 {
				t.Fatalf("a search was made: %v", opsOf(rec))
			}
		})
		t.Run("visible, hidden, visible, missing plus root send visible and null", func(t *testing.T) {
			rec.reset()
			r := guess(`["s-7f3c","b-secret","s-7f3c","missing"],"include_root_sessions":true`)
			if r.IsError {
				t.Fatal(r.Text)
			}
			var pre, clause string
			for _, c := range rec.Calls() {
				switch req := c.Request.(type) {
				case []dshq.Filter:
					if len(req) == 3 && req[0].Kind == dshq.FilterID && len(req[0].Values) > 1 && req[2].Kind == dshq.FilterTenant {
						pre = filterValues(req[0])
					}
				case dshq.SessionSearchRequest:
					for _, fl := range req.SessionFilters {
						if fl.Kind == dshq.FilterParent {
							clause = filterValues(fl)
						}
					}
				}
			}
			if pre != "s-7f3c,b-secret,missing" {
				t.Fatalf("preflight ids = %q (duplicates must be sent once)", pre)
			}
			if clause != "s-7f3c,null" {
				t.Fatalf("parent clause = %q", clause)
			}
		})
	})
}

func filterValues(f dshq.Filter) string {
	var out []string
	for _, v := range f.Values {
		if v == nil {
			out = append(out, "null")
		} else {
			out = append(out, *v)
		}
	}
	return strings.Join(out, ",")
}

// scripted serves fixed session-search pages (by cursor) over the real
// service.
type scripted struct {
	tools.Service
	pages    map[string]dshq.SessionSearchPage
	searches int
}

func (s *scripted) SearchSessions(ctx context.Context, req dshq.SessionSearchRequest) (dshq.SessionSearchPage, error) {
	s.searches++
	p, ok := s.pages[req.Cursor]
	if !ok {
		return dshq.SessionSearchPage{}, dshq.Errorf(dshq.CodeStaleCursor, "cursor is stale because its relevant corpus changed")
	}
	return p, nil
}

func hit(id, cwd string) dshq.SessionSearchHit {
	return dshq.SessionSearchHit{
		SessionRecord: dshq.SessionRecord{Header: dshq.Header{Version: 2, ID: id, CreatedAt: 1788000000000, Cwd: dshq.Str(cwd)}, Persisted: true},
		BestMatch: dshq.EventSearchHit{EventRecord: dshq.EventRecord{SessionID: id, Seq: 1, Type: "user/message",
			Time: 1788000000001, Surface: dshq.SurfaceCurrent}, Snippet: "retry budget of " + id},
	}
}

// Paging, the collection cap, repeated and stale cursors
// (docs/tools.md#collection-caps-and-timeouts).
func TestItem39PagingAndCap(t *testing.T) {
	const a, b = "/home/u/proj", "/home/u/other"
	pages := map[string]dshq.SessionSearchPage{
		"":   {Items: []dshq.SessionSearchHit{hit("s-caller", a), hit("outside", b)}, NextCursor: "c1"},
		"c1": {Items: []dshq.SessionSearchHit{hit("a", a)}, NextCursor: "c2"},
		"c2": {Items: []dshq.SessionSearchHit{hit("b", a), hit("extra", a)}},
	}
	svc := newService(t, fullCorpus)
	t.Run("the caller and outside hits are hidden and the cap needs an extra hit", func(t *testing.T) {
		s := &scripted{Service: svc, pages: pages}
		r := call(t, newTools(t, s, tools.WithMaxSearchResults(2)), "s-caller", tools.NameSessionSearch, `{"query":"retry budget"}`)
		goldenText(t, "item39_capped", resultText(r))
		noneOf(t, r.Text, "outside", "Session s-caller", "extra")
		if !strings.HasSuffix(r.Text, "\n\nResult cap reached. Narrow the query or add filters to find additional matches.") {
			t.Fatalf("no cap line:\n%s", r.Text)
		}
	})
	t.Run("rejected items after the cap do not set it", func(t *testing.T) {
		p := map[string]dshq.SessionSearchPage{
			"": {Items: []dshq.SessionSearchHit{hit("a", a), hit("b", a), hit("outside", b), hit("s-caller", a)}},
		}
		s := &scripted{Service: svc, pages: p}
		r := call(t, newTools(t, s, tools.WithMaxSearchResults(2)), "s-caller", tools.NameSessionSearch, `{"query":"retry budget"}`)
		if r.IsError || strings.Contains(r.Text, "Result cap reached") || !strings.Contains(r.Text, "results (2)") {
			t.Fatalf("got:\n%s", r.Text)
		}
	})
	t.Run("a repeated cursor is an invalid cursor", func(t *testing.T) {
		p := map[string]dshq.SessionSearchPage{
			"":   {Items: []dshq.SessionSearchHit{hit("a", a)}, NextCursor: "c1"},
			"c1": {Items: []dshq.SessionSearchHit{hit("b", a)}, NextCursor: "c1"},
		}
		s := &scripted{Service: svc, pages: p}
		r := call(t, newTools(t, s), "s-caller", tools.NameSessionSearch, `{"query":"retry budget"}`)
		wantError(t, r, dshq.CodeInvalidCursor, "Error: session-search provider repeated a continuation cursor")
	})
	t.Run("a stale cursor is reported and not retried", func(t *testing.T) {
		p := map[string]dshq.SessionSearchPage{"": {Items: []dshq.SessionSearchHit{hit("a", a)}, NextCursor: "gone"}}
		s := &scripted{Service: svc, pages: p}
		r := call(t, newTools(t, s), "s-caller", tools.NameSessionSearch, `{"query":"retry budget"}`)
		wantError(t, r, dshq.CodeStaleCursor, "Error: session history changed while paging; retry the complete search call")
		if s.searches != 2 {
			t.Fatalf("searches = %d, want 2 (no retry)", s.searches)
		}
	})
	t.Run("real paging visits every page of the provider", func(t *testing.T) {
		f := newSpy(svc)
		f.pageSize = 1
		r := call(t, newTools(t, f), "s-caller", tools.NameSessionSearch, `{"query":"retry budget"}`)
		goldenText(t, "session_search_full_corpus", resultText(r))
		if countOp(f, "sessions.search") < 2 {
			t.Fatalf("searches = %v", opsOf(f))
		}
	})
}

// seqSent returns the seq filter of the first recorded event search.
func seqSent(rec calls) string {
	for _, c := range rec.Calls() {
		if req, ok := c.Request.(dshq.EventSearchRequest); ok {
			for _, fl := range req.Filters {
				if fl.Kind == dshq.FilterSeq {
					b := func(v *float64) string {
						if v == nil {
							return "open"
						}
						return fmt.Sprint(*v)
					}
					return b(fl.From) + ".." + b(fl.To)
				}
			}
			return "none"
		}
	}
	return "no search"
}

// The caller's current step is left out of its own session's search
// (docs/tools.md#searching-the-current-session).
func TestItem40CurrentStepExclusion(t *testing.T) {
	onPipeline(t, func(t *testing.T, tl *tools.Tools, rec *spy) {
		t.Run("seq 0..99 with the last step/start at 2 sends 0..1", func(t *testing.T) {
			rec.reset()
			r := call(t, tl, "s-caller", tools.NameSessionEventSearch, `{"query":"retry budget","seq_from":0,"seq_to":99}`)
			if r.IsError || seqSent(rec) != "0..1" || !strings.Contains(r.Text, "Event search results (1):\n1. seq 1 |") {
				t.Fatalf("filter %s, result %+v", seqSent(rec), r)
			}
		})
		t.Run("seq_from at the step start answers empty without a search", func(t *testing.T) {
			rec.reset()
			r := call(t, tl, "s-caller", tools.NameSessionEventSearch, `{"query":"retry budget","seq_from":2}`)
			if r.Text != "Session s-caller — untitled\n\nNo prior event matches found." || seqSent(rec) != "no search" {
				t.Fatalf("got %+v, %s", r, seqSent(rec))
			}
		})
		t.Run("naming the own session applies the exclusion too", func(t *testing.T) {
			rec.reset()
			call(t, tl, "s-caller", tools.NameSessionEventSearch, `{"session_id":"s-caller","query":"retry budget"}`)
			if seqSent(rec) != "open..1" {
				t.Fatalf("filter %s", seqSent(rec))
			}
		})
		t.Run("a session without a step fails with no current step", func(t *testing.T) {
			r := call(t, tl, "a-orphan", tools.NameSessionEventSearch, `{"query":"retry budget"}`)
			wantError(t, r, dshq.CodeToolNoCurrentStep, "Error: current-session search requires an active step boundary")
		})
	})
}

// Timestamp precision (docs/tools.md#timestamps).
func TestItem41TimestampPrecision(t *testing.T) {
	onPipeline(t, item41)
}

func item41(t *testing.T, tl *tools.Tools, rec *spy) {
	run := func(t *testing.T, from, to string) (tools.Result, *spy) {
		rec.reset()
		return call(t, tl, "s-caller", tools.NameSessionEventSearch,
			fmt.Sprintf(`{"session_id":"s-7f3c","query":"retry budget","time_from":%q,"time_to":%q}`, from, to)), rec
	}
	t.Run("milliseconds select exactly one event time", func(t *testing.T) {
		r, _ := run(t, "2026-08-29T10:40:00.101Z", "2026-08-29T10:40:00.101Z")
		if !strings.Contains(r.Text, "results (1):\n1. seq 1 |") {
			t.Fatalf("got:\n%s", r.Text)
		}
	})
	t.Run("bounds inside one millisecond match nothing and search nothing", func(t *testing.T) {
		r, f := run(t, "2026-08-29T10:40:00.10100001Z", "2026-08-29T18:40:00.1019999+08:00")
		if r.IsError || !strings.HasSuffix(r.Text, "No prior event matches found.") || countOp(f, "events.search") != 0 {
			t.Fatalf("got %+v %v", r, opsOf(f))
		}
	})
	t.Run("a range reversed below one millisecond is refused before any search", func(t *testing.T) {
		r, f := run(t, "2026-08-29T10:40:00.1019Z", "2026-08-29T10:40:00.1011Z")
		wantError(t, r, dshq.CodeInvalidFilter, "Error: event time range from must be less than or equal to to")
		if countOp(f, "events.search") != 0 {
			t.Fatalf("searched: %v", opsOf(f))
		}
	})
	t.Run(".12311 after .1231 is reversed with implicit trailing zeros", func(t *testing.T) {
		r, _ := run(t, "2026-08-29T10:40:00.12311Z", "2026-08-29T10:40:00.1231Z")
		wantError(t, r, dshq.CodeInvalidFilter, "")
	})
	t.Run(".100 to .1 is an equal, valid range", func(t *testing.T) {
		r, _ := run(t, "2026-08-29T10:40:00.100Z", "2026-08-29T10:40:00.1Z")
		if r.IsError {
			t.Fatal(r.Text)
		}
	})
	t.Run("a timestamp without zone is refused by name", func(t *testing.T) {
		r, _ := run(t, "2026-08-29T10:40:00", "2026-08-29T10:40:00Z")
		wantError(t, r, dshq.CodeInvalidFilter, "Error: time_from must be an ISO 8601 timestamp with a time zone, such as 2026-08-29T10:40:00Z or 2026-08-29T18:40:00.123+08:00")
	})
}

// failing is an error with a secret, a cause chain and a cyclic Unwrap.
type cyclic struct{ msg string }

func (c *cyclic) Error() string { return c.msg }
func (c *cyclic) Unwrap() error { return c }

type panicHandler struct{ slog.Handler }

func (panicHandler) Handle(context.Context, slog.Record) error { panic("logger broke") }

// The sanitizer: service failures, hostile errors and cancellation answer
// fixed safe messages (docs/tools.md#sanitized-errors).
func TestItem42Sanitizer(t *testing.T) {
	const secret = "b-secret-conflicting-id"
	conflict := &dshq.Error{Code: dshq.CodeSourceConflict, Message: "header of " + secret + " conflicts",
		Err: fmt.Errorf("listing: %w", &cyclic{"cyclic " + secret})}
	failOn := func(op string, err error) func(string) error {
		return func(o string) error {
			if o == op {
				return err
			}
			return nil
		}
	}
	svc := newService(t, fullCorpus)
	t.Run("a source conflict becomes the generic error and the secret stays in the log", func(t *testing.T) {
		var logs bytes.Buffer
		f := newSpy(svc)
		f.failWith(failOn("sessions.trace", conflict))
		tl := newTools(t, f, tools.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		r := call(t, tl, "s-caller", tools.NameSessionTrace, `{}`)
		wantError(t, r, dshq.CodeToolFailed, "Error: session query operation failed")
		if !strings.Contains(logs.String(), secret) || !strings.Contains(logs.String(), "SESSION_QUERY_SOURCE_CONFLICT") {
			t.Fatalf("log lacks the diagnostic:\n%s", logs.String())
		}
	})
	t.Run("every known code gets its fixed safe message", func(t *testing.T) {
		for code, msg := range map[dshq.Code]string{
			dshq.CodeInvalidLineage:    "session lineage is invalid",
			dshq.CodePersistenceFailed: "session history storage is unavailable",
			dshq.CodeIndexFailed:       "session search index is unavailable",
			dshq.CodeNotCaughtUp:       "session history is not indexed up to the latest events yet; retry the call",
			dshq.CodeReplyTooLarge:     "session query operation failed",
			dshq.CodeInvalidConfig:     "session query operation failed",
		} {
			f := newSpy(svc)
			f.failWith(failOn("sessions.trace", &dshq.Error{Code: code, Message: "detail " + secret}))
			r := call(t, newTools(t, f), "s-caller", tools.NameSessionTrace, `{}`)
			if !r.IsError || r.Text != "Error: "+msg {
				t.Fatalf("%s: got %+v", code, r)
			}
		}
	})
	t.Run("a non-taxonomy error is generic", func(t *testing.T) {
		f := newSpy(svc)
		f.failWith(failOn("events.read", errors.New("nats: timeout "+secret)))
		r := call(t, newTools(t, f), "s-caller", tools.NameSessionEventRead, `{"seq":0}`)
		wantError(t, r, dshq.CodeToolFailed, "Error: session query operation failed")
	})
	t.Run("a throwing logger yields the generic error", func(t *testing.T) {
		f := newSpy(svc)
		f.failWith(failOn("sessions.trace", &dshq.Error{Code: dshq.CodeInvalidLineage, Message: secret}))
		tl := newTools(t, f, tools.WithLogger(slog.New(panicHandler{slog.NewTextHandler(&bytes.Buffer{}, nil)})))
		wantError(t, call(t, tl, "s-caller", tools.NameSessionTrace, `{}`), dshq.CodeToolFailed, "Error: session query operation failed")
	})
	t.Run("cancellation during parent pre-authorization reports the caller's reason unlogged", func(t *testing.T) {
		var logs bytes.Buffer
		reason := errors.New("caller went away")
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		f := newSpy(svc)
		filters := 0
		f.failWith(func(op string) error {
			if op == "sessions.filter" {
				if filters++; filters == 2 {
					cancel(reason)
					return ctx.Err()
				}
			}
			return nil
		})
		tl := newTools(t, f, tools.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		_, err := tl.Call(ctx, tools.AsSession("s-caller"), tools.NameSessionSearch, []byte(`{"query":"x","parent_session_ids":["s-7f3c"]}`))
		if !errors.Is(err, reason) {
			t.Fatalf("err = %v, want the caller's reason", err)
		}
		if logs.Len() != 0 {
			t.Fatalf("cancellation was logged: %s", logs.String())
		}
	})
	t.Run("an unauthorized title observation fails the whole call", func(t *testing.T) {
		moved := &movedTitles{Service: svc}
		r := call(t, newTools(t, moved), "s-caller", tools.NameSessionTrace, `{"session_id":"s-7f3c"}`)
		wantError(t, r, dshq.CodeToolUnauthorized, "Error: session target is outside the caller workspace")
	})
	t.Run("a failed title read keeps the result with a safe code", func(t *testing.T) {
		r := call(t, newTools(t, &rejectTitles{svc}), "s-caller", tools.NameSessionTrace, `{"session_id":"s-7f3c"}`)
		if !strings.HasPrefix(r.Text, "Session s-7f3c — untitled (title unavailable: SESSION_QUERY_TOOL_FAILED)\n") {
			t.Fatalf("got:\n%s", r.Text)
		}
		noneOf(t, r.Text, secret)
	})
}

// movedTitles answers titles with a header that moved to another workspace.
type movedTitles struct{ tools.Service }

func (m *movedTitles) Titles(ctx context.Context, ids []string) ([]dshq.TitleResult, error) {
	out, err := m.Service.Titles(ctx, ids)
	for i := range out {
		if out[i].Value != nil {
			out[i].Value.Session.Cwd = dshq.Str("/elsewhere")
		}
	}
	return out, err
}

// rejectTitles rejects every title read with a secret-bearing conflict.
type rejectTitles struct{ tools.Service }

func (r *rejectTitles) Titles(_ context.Context, ids []string) ([]dshq.TitleResult, error) {
	var out []dshq.TitleResult
	for _, id := range ids {
		out = append(out, dshq.TitleResult{SessionID: id, Status: "rejected",
			Reason: &dshq.ErrorBody{Code: dshq.CodeSourceConflict, Message: "b-secret-conflicting-id"}})
	}
	return out, nil
}

// session_event_read's rendering and argument errors (docs/tools.md#renderings,
// docs/tools.md#argument-validation).
func TestItem43EventRead(t *testing.T) {
	tl := newTools(t, newService(t, fullCorpus, toolstest.Log{JSONL: []byte(bigLog)}))
	item43(t, tl)
	t.Run("a large target is rendered whole", func(t *testing.T) {
		r := call(t, tl, "s-caller", tools.NameSessionEventRead, `{"session_id":"big","seq":0}`)
		if r.IsError || !strings.Contains(r.Text, bigText) {
			t.Fatalf("target truncated or failed: %v %d bytes", r.IsError, len(r.Text))
		}
	})
}

func item43(t *testing.T, tl *tools.Tools) {
	for _, tc := range []struct {
		name, args string
		code       dshq.Code
		text       string
	}{
		{"a negative seq is an invalid filter", `{"seq":-1}`, dshq.CodeInvalidFilter, "Error: seq must be a non-negative safe integer"},
		{"a seq above 2^53-1 is an invalid filter", `{"seq":9007199254740992}`, dshq.CodeInvalidFilter, "Error: seq must be a non-negative safe integer"},
		{"a negative before is an invalid filter", `{"seq":1,"before":-1}`, dshq.CodeInvalidFilter, "Error: before must be a non-negative safe integer"},
		{"a fractional after fails the schema", `{"seq":1,"after":1.5}`, dshq.CodeInvalidArgs, "Error: invalid arguments: after: must be an integer"},
		{"a missing seq fails the schema", `{}`, dshq.CodeInvalidArgs, "Error: invalid arguments: seq: is required"},
		{"a seq past the end is not found", `{"seq":99}`, dshq.CodeEventNotFound, "Error: session event was not found"},
		{"arguments that are not an object fail the schema", `[1]`, dshq.CodeInvalidArgs, "Error: invalid arguments: arguments must be a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, call(t, tl, "s-caller", tools.NameSessionEventRead, tc.args), tc.code, tc.text)
		})
	}
}

// bigLog is a session of the caller's workspace whose one event is
// bigText, larger than a default page.
var (
	bigText = strings.Repeat("retry budget ", 20000)
	bigLog  = fmt.Sprintf("{\"type\":\"session\",\"version\":2,\"id\":\"big\",\"createdAt\":1,\"cwd\":\"/home/u/proj\",\"isSeeded\":false}\n"+
		"{\"type\":\"user/message\",\"seq\":0,\"time\":5,\"data\":{\"id\":\"m\",\"role\":\"user\",\"source\":{\"kind\":\"user\"},\"content\":[{\"type\":\"text\",\"text\":%q}]},\"surfaceOp\":\"append\"}\n", bigText)
)

// Validation order of session_search (docs/tools.md#argument-validation).
func TestSessionSearchValidationOrder(t *testing.T) {
	tl := newTools(t, newService(t, fullCorpus))
	for _, tc := range []struct {
		name, args, text string
	}{
		{"the query is checked before session_ids", `{"query":"  ","session_ids":[]}`, "Error: query must contain non-whitespace text"},
		{"a NUL in the query is refused", `{"query":"a\u0000b"}`, "Error: query must not contain NUL characters"},
		{"session_ids before created_at", `{"query":"q","session_ids":[],"created_at_from":"x"}`, "Error: session_ids must contain at least one value when supplied"},
		{"created_at before availability", `{"query":"q","created_at_from":"x","availability":[]}`, "Error: created_at_from must be an ISO 8601 timestamp with a time zone, such as 2026-08-29T10:40:00Z or 2026-08-29T18:40:00.123+08:00"},
		{"a reversed creation range", `{"query":"q","created_at_from":"2026-01-02T00:00Z","created_at_to":"2026-01-01T00:00Z"}`, "Error: session creation time range from must be less than or equal to to"},
		{"availability before event seq", `{"query":"q","availability":[],"event_seq_from":-1}`, "Error: availability must contain at least one value when supplied"},
		{"event seq before event time", `{"query":"q","event_seq_from":3,"event_seq_to":2,"event_time_from":"x"}`, "Error: session sequence range from must be less than or equal to to"},
		{"event time before event types", `{"query":"q","event_time_to":"x","event_types":[]}`, "Error: event_time_to must be an ISO 8601 timestamp with a time zone, such as 2026-08-29T10:40:00Z or 2026-08-29T18:40:00.123+08:00"},
		{"event types before surfaces", `{"query":"q","event_types":[],"event_surfaces":[]}`, "Error: event_types must contain at least one value when supplied"},
		{"surfaces are reported as surfaces", `{"query":"q","event_surfaces":[],"parent_session_ids":[]}`, "Error: surfaces must contain at least one value when supplied"},
		{"parents last", `{"query":"q","parent_session_ids":[]}`, "Error: parent_session_ids must contain at least one value when supplied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t, tl, "s-caller", tools.NameSessionSearch, tc.args)
			if !r.IsError || r.Text != tc.text {
				t.Fatalf("got %+v", r)
			}
		})
	}
}

// Validation order of session_event_search: authorization before the query,
// and an empty clamped range skips the later checks.
func TestSessionEventSearchValidationOrder(t *testing.T) {
	tl := newTools(t, newService(t, fullCorpus))
	wantError(t, call(t, tl, "s-caller", tools.NameSessionEventSearch, `{"session_id":"b-secret","query":" "}`),
		dshq.CodeToolUnauthorized, "")
	wantError(t, call(t, tl, "s-caller", tools.NameSessionEventSearch, `{"query":" ","seq_from":-1}`),
		dshq.CodeInvalidQuery, "")
	r := call(t, tl, "s-caller", tools.NameSessionEventSearch, `{"query":"q","seq_from":5,"time_from":"bad","surfaces":[]}`)
	if r.IsError || !strings.HasSuffix(r.Text, "No prior event matches found.") {
		t.Fatalf("got %+v", r)
	}
}

func TestPanickingLoggerOnTitleFailure(t *testing.T) {
	tl := newTools(t, &rejectTitles{newService(t, fullCorpus)},
		tools.WithLogger(slog.New(panicHandler{slog.NewTextHandler(&bytes.Buffer{}, nil)})))
	r := call(t, tl, "s-caller", tools.NameSessionTrace, `{"session_id":"s-7f3c"}`)
	if r.IsError || !strings.HasPrefix(r.Text, "Session s-7f3c — untitled (title unavailable: SESSION_QUERY_TOOL_FAILED)") {
		t.Fatalf("got %+v", r)
	}
}
