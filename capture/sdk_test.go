package capture_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/claudecode"
	"github.com/dshq/dshq/capture/codex"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/corpus"
	"github.com/dshq/dshq/internal/testnats"
)

// TestConvertedLogsGoThroughTheHarnessSDK publishes converted files the
// way a watcher will, through the harness SDK on a real embedded JetStream:
// headers with Create, events with Append (strict validation, payload
// bound), a restart half way that reopens every session for writing (which
// reads the stored events back and refuses a type the SDK does not know
// unless it is ignorable), then the rest. The stored records must be
// exactly what a one-shot Store.Import of the finished file stores
// (Import finds them all present), and the file's session must write the
// file back byte for byte from what the stream holds.
func TestConvertedLogsGoThroughTheHarnessSDK(t *testing.T) {
	dir := corpus.RequireHarnesses(t)
	files := []struct{ harness, path, rel string }{
		// Lines of over 100 KB, and a subagent's header.
		{dshq.HarnessClaudeCode, filepath.Join(dir, "claude-code/marot__spotter/test/fixtures/transcripts/258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-a881341.jsonl"), "258c7280-ae70-4798-800f-63464d01a85d/subagents/agent-a881341.jsonl"},
		// Inline sidechains: three sessions from one file.
		{dshq.HarnessClaudeCode, filepath.Join(dir, "claude-code/daaain__claude-code-log/test/test_data/sidechain_integrated.jsonl"), "sidechain_integrated.jsonl"},
		{dshq.HarnessClaudeCode, filepath.Join("claudecode", "testdata", "odd.jsonl"), "odd.jsonl"},
		// 816 events: copies, tool calls of every kind, web searches.
		{dshq.HarnessCodex, filepath.Join(dir, "codex/madshn__localpush/src-tauri/tests/fixtures/codex/2026-02-23/raw/sessions/rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"), "rollout-2026-02-23T12-40-23-019c8a4c-ed82-79a1-aa28-7738fc5ab61a.jsonl"},
		// A compaction.
		{dshq.HarnessCodex, filepath.Join("codex", "testdata", "rollout-2026-03-11T10-00-00-1b1b1b1b-2222-4333-8444-555566667777.jsonl"), "rollout-2026-03-11T10-00-00-1b1b1b1b-2222-4333-8444-555566667777.jsonl"},
		{dshq.HarnessCodex, filepath.Join("codex", "testdata", "rollout-odd.jsonl"), "rollout-odd.jsonl"},
	}
	ctx := context.Background()
	store, err := bus.NewStore(ctx, testnats.Start(t, embedded.Config{}).Conn(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		t.Run(f.rel, func(t *testing.T) {
			data, err := os.ReadFile(f.path)
			if err != nil {
				t.Fatal(err)
			}
			newConv := func() capture.Converter {
				if f.harness == dshq.HarnessCodex {
					return codex.New(capture.Config{Path: f.rel})
				}
				return claudecode.New(capture.Config{Path: f.rel})
			}
			lines := capture.SplitLines(data)
			conv := newConv()
			handles := map[string]*bus.Handle{}
			pending := map[string][]dshq.Event{}
			var order []string
			flush := func() {
				for _, id := range order {
					if evs := pending[id]; len(evs) > 0 {
						if _, err := handles[id].Append(ctx, evs); err != nil {
							t.Fatalf("append to %s: %v", id, err)
						}
						pending[id] = nil
					}
				}
			}
			publish := func(ups []capture.Update) {
				for _, u := range ups {
					if u.Header != nil {
						h, err := store.Create(ctx, u.Header.Header)
						if err != nil {
							t.Fatalf("create %s: %v", u.SessionID, err)
						}
						handles[u.SessionID] = h
						order = append(order, u.SessionID)
					}
					pending[u.SessionID] = append(pending[u.SessionID], u.Events...)
				}
			}
			for i, l := range lines {
				ups, err := conv.Feed(l)
				if err != nil {
					t.Fatal(err)
				}
				publish(ups)
				if i%200 == 199 {
					flush()
				}
				if i == len(lines)/2 {
					// The watcher restarts: every handle closes, and each
					// session is opened again for writing from the stream.
					flush()
					for _, id := range order {
						n := handles[id].NextSeq()
						if err := handles[id].Close(ctx); err != nil {
							t.Fatal(err)
						}
						h, err := store.Open(ctx, id, bus.Write)
						if err != nil {
							t.Fatalf("reopen %s for writing: %v", id, err)
						}
						if h.NextSeq() != n {
							t.Fatalf("reopened %s at seq %d, want %d", id, h.NextSeq(), n)
						}
						handles[id] = h
					}
				}
			}
			publish(conv.Finish())
			flush()
			for _, id := range order {
				if err := handles[id].Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ups, err := capture.Convert(newConv(), data)
			if err != nil {
				t.Fatal(err)
			}
			logs, err := capture.Collect(ups)
			if err != nil {
				t.Fatal(err)
			}
			if len(logs) != len(order) {
				t.Fatalf("%d sessions published, %d in the whole conversion", len(order), len(logs))
			}
			for i, l := range logs {
				res, err := store.Import(ctx, l.Header, l.Events)
				if err != nil {
					t.Fatalf("import %s: %v", l.Header.Header.ID, err)
				}
				if res.Stored != 0 || res.AlreadyPresent != len(l.Events)+1 {
					t.Fatalf("import of %s found %d records present and stored %d: the SDK stored other records", l.Header.Header.ID, res.AlreadyPresent, res.Stored)
				}
				if i > 0 {
					continue
				}
				h, err := store.Open(ctx, l.Header.Header.ID, bus.Read)
				if err != nil {
					t.Fatal(err)
				}
				stored, err := h.Read(ctx, 0, int64(len(l.Events)))
				if err != nil {
					t.Fatal(err)
				}
				if h.Header().Harness != f.harness {
					t.Errorf("stored header has harness %q", h.Header().Harness)
				}
				src, err := capture.Source(stored)
				if err != nil || !bytes.Equal(src, data) {
					t.Fatalf("the stored log does not write the file back (%v)", err)
				}
				if strings.Contains(f.rel, "sidechain") && len(logs) < 2 {
					t.Fatalf("the inline sidechains gave no child")
				}
			}
		})
	}
}
