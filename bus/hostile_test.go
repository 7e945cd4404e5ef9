package bus

import (
	"context"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

// Hostile ids (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys)
// and bodies are refused before anything is published: the stream is unchanged
// after each.
func TestHostileInputIsRefusedBeforePublishing(t *testing.T) {
	e := testnats.Start(t, embedded.Config{})
	ctx := testCtx(t)
	s := newStore(t, e)
	w, err := s.Create(ctx, header("target"))
	if err != nil {
		t.Fatal(err)
	}
	defer mustClose(t, w)
	if _, err := w.Append(ctx, cmds(t, 0, 1)); err != nil {
		t.Fatal(err)
	}

	badIDs := map[string]string{
		"an empty id":                  "",
		"an id over 512 bytes":         strings.Repeat("x", 513),
		"an id with invalid UTF-8":     "bad\xffid",
		"an id with a NUL":             "a\x00b",
		"an id with a newline":         "a\nb",
		"an id with DEL":               "a\x7fb",
		"an id with a C1 control":      "a\u0085b",
		"an id with a truncated UTF-8": "\xe2\x82",
	}
	for name, id := range badIDs {
		t.Run("create of "+name+" is refused", func(t *testing.T) {
			before := streamMsgs(t, s)
			_, err := s.Create(ctx, header(id))
			wantKind(t, err, ErrInvalidArgument, "session id")
			for _, a := range []Access{Read, Write} {
				_, err = s.Open(ctx, id, a)
				wantKind(t, err, ErrInvalidArgument, "session id")
			}
			_, err = s.Stat(ctx, id)
			wantKind(t, err, ErrInvalidArgument, "session id")
			if got := streamMsgs(t, s); got != before {
				t.Fatalf("stream changed %d → %d", before, got)
			}
		})
	}

	badHeaders := map[string]func(*dshq.Header){
		"a relative cwd":          func(h *dshq.Header) { h.Cwd = dshq.Str("relative/dir") },
		"a negative createdAt":    func(h *dshq.Header) { h.CreatedAt = -1 },
		"a createdAt beyond 2^53": func(h *dshq.Header) { h.CreatedAt = 1 << 53 },
		"version 0":               func(h *dshq.Header) { h.Version = 0 },
		"version 3":               func(h *dshq.Header) { h.Version = 3 },
		"an unknown origin":       func(h *dshq.Header) { h.Origin = "sidecar" },
		"a negative depth":        func(h *dshq.Header) { d := int64(-1); h.DelegationDepth = &d },
		"a parent with a NUL":     func(h *dshq.Header) { h.ParentSession = dshq.Str("p\x00") },
		"seeded without a count":  func(h *dshq.Header) { h.IsSeeded = true },
		"an invalid UTF-8 preset": func(h *dshq.Header) { h.AgentPreset = dshq.Str("\xff") },
		"an invalid UTF-8 cwd":    func(h *dshq.Header) { h.Cwd = dshq.Str("/\xff") },
		"an empty parent session": func(h *dshq.Header) { h.ParentSession = dshq.Str("") },
	}
	for name, mutate := range badHeaders {
		t.Run("create with "+name+" is refused", func(t *testing.T) {
			before := streamMsgs(t, s)
			h := header("hostile-header")
			mutate(&h)
			_, err := s.Create(ctx, h)
			wantKind(t, err, ErrInvalidArgument, "")
			if got := streamMsgs(t, s); got != before {
				t.Fatalf("stream changed %d → %d", before, got)
			}
		})
	}
	t.Run("an inherited count on an unseeded header is refused", func(t *testing.T) {
		_, err := s.Create(ctx, header("unseeded"), WithInheritedEventCount(3))
		wantKind(t, err, ErrInvalidArgument, "not seeded")
	})

	badBodies := map[string]string{
		"invalid JSON":                 `{"type":"command/run","seq":1,`,
		"a duplicate key":              `{"type":"command/run","seq":1,"time":1,"data":{},"data":{}}`,
		"negative zero":                `{"type":"command/run","seq":1,"time":1,"data":{"x":-0}}`,
		"a number beyond a double":     `{"type":"command/run","seq":1,"time":1,"data":{"x":1e400}}`,
		"an extra envelope key":        `{"type":"command/run","seq":1,"time":1,"data":{},"extra":1}`,
		"no data":                      `{"type":"command/run","seq":1,"time":1}`,
		"an empty type":                `{"type":"","seq":1,"time":1,"data":{}}`,
		"ignorable false":              `{"type":"command/run","seq":1,"time":1,"data":{},"ignorable":false}`,
		"a surfaceOp on a non-surface": `{"type":"turn/start","seq":1,"time":1,"data":{"turn":"t"},"surfaceOp":{"kind":"append"}}`,
		"a user message without id":    `{"type":"user/message","seq":1,"time":1,"data":{"role":"user","content":[]},"surfaceOp":{"kind":"append"}}`,
		"deep nesting":                 `{"type":"command/run","seq":1,"time":1,"data":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`,
		"an array record":              `[1,2,3]`,
		"invalid UTF-8":                "{\"type\":\"command/run\",\"seq\":1,\"time\":1,\"data\":\"\xff\"}",
	}
	for name, raw := range badBodies {
		t.Run("an event with "+name+" is refused", func(t *testing.T) {
			before := streamMsgs(t, s)
			evt := dshq.Event{Type: "command/run", Seq: 1, Raw: []byte(raw)}
			_, err := w.Append(ctx, []dshq.Event{evt})
			wantKind(t, err, ErrInvalidArgument, "")
			if got := streamMsgs(t, s); got != before {
				t.Fatalf("stream changed %d → %d", before, got)
			}
		})
	}
	t.Run("a valid event whose raw record disagrees with its fields is refused", func(t *testing.T) {
		evt := ev(t, 1, "command/run", map[string]any{})
		evt.Type = "turn/start"
		_, err := w.Append(ctx, []dshq.Event{evt})
		wantKind(t, err, ErrInvalidArgument, "differs from its fields")
	})
	t.Run("a batch with one bad event stores none of it", func(t *testing.T) {
		before := streamMsgs(t, s)
		batch := append(cmds(t, 1, 3), dshq.Event{Seq: 4, Raw: []byte(`{"type":"x","seq":4}`)})
		_, err := w.Append(ctx, batch)
		wantKind(t, err, ErrInvalidArgument, "index 3")
		if got := streamMsgs(t, s); got != before {
			t.Fatalf("stream changed %d → %d", before, got)
		}
	})
	t.Run("an event over the payload limit is refused and nothing is stored", func(t *testing.T) {
		before := streamMsgs(t, s)
		big := ev(t, 1, "command/run", map[string]any{"out": strings.Repeat("y", 2<<20)})
		_, err := w.Append(ctx, []dshq.Event{big})
		wantKind(t, err, ErrInvalidArgument, "over the bus's maximum payload")
		if got := streamMsgs(t, s); got != before {
			t.Fatalf("stream changed %d → %d", before, got)
		}
		if _, err := w.Append(ctx, cmds(t, 1, 1)); err != nil {
			t.Fatalf("handle unusable after a refused record: %v", err)
		}
	})
	t.Run("ids that look like paths or subjects stay in one subject token", func(t *testing.T) {
		for _, id := range []string{"../../etc/passwd", "a.b", "*", ">", "dsh.log.>", "a b", "~x", "日本語", strings.Repeat("z", 512)} {
			h, err := s.Create(ctx, header(id))
			if err != nil {
				t.Fatalf("create %q: %v", id, err)
			}
			if _, err := h.Append(ctx, cmds(t, 0, 1)); err != nil {
				t.Fatalf("append %q: %v", id, err)
			}
			mustClose(t, h)
			if strings.ContainsAny(h.token, ".*> ") {
				t.Fatalf("token %q of %q is not one subject token", h.token, id)
			}
			r, err := s.Open(context.Background(), id, Read)
			if err != nil {
				t.Fatalf("open %q: %v", id, err)
			}
			got, err := r.Read(ctx, 0, -1)
			if err != nil || len(got) != 1 {
				t.Fatalf("read %q: %d events, %v", id, len(got), err)
			}
			mustClose(t, r)
		}
	})
}
