package follow_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/dshq/dshq/capture"
	"github.com/dshq/dshq/capture/follow"
	"github.com/dshq/dshq/capture/restore"
)

// TestResumeRecognisesARestoredFileElsewhere: a file whose stored lines
// are there with their working directories rewritten (dshq restore --cwd)
// resumes as its session: the stored prefix re-derived from the stored
// lines, the file continued after its own (longer or shorter) bytes; a file
// changed in anything else is still refused.
func TestResumeRecognisesARestoredFileElsewhere(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	data := []byte(`{"parentUuid":null,"isSidechain":false,"cwd":"/home/a/proj","sessionId":"5a1e0000-0000-4000-8000-0000000000aa","version":"2.1.39","type":"user","message":{"role":"user","content":"the pelican migration"},"uuid":"u-1","timestamp":"2026-02-10T21:16:01.000Z"}
{"parentUuid":"u-1","isSidechain":false,"cwd":"/home/a/proj/sub","sessionId":"5a1e0000-0000-4000-8000-0000000000aa","version":"2.1.39","type":"assistant","message":{"model":"m","id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"in /home/a/proj"}]},"uuid":"a-1","timestamp":"2026-02-10T21:16:02.000Z"}
{"parentUuid":"a-1","isSidechain":false,"cwd":"/home/a/proj","sessionId":"5a1e0000-0000-4000-8000-0000000000aa","version":"2.1.39","type":"system","subtype":"turn_duration","durationMs":1000,"uuid":"t-1","timestamp":"2026-02-10T21:16:03.000Z"}
`)
	path := "/x/5a1e0000-0000-4000-8000-0000000000aa.jsonl"
	if _, err := follow.Import(ctx, st, capture.FormatClaudeCode, path, data); err != nil {
		t.Fatal(err)
	}
	for _, newDir := range []string{"/Users/bee/somewhere/much/longer/app", "/b"} {
		m := restore.Map{}.Add(restore.Pair{Old: "/home/a/proj", New: newDir})
		var file []byte
		for _, l := range bytes.SplitAfter(data, []byte("\n")) {
			text, _ := restore.Rewrite(capture.FormatClaudeCode, bytes.TrimSuffix(l, []byte("\n")), m)
			if len(l) > 0 {
				file = append(append(file, text...), '\n')
			}
		}
		more := []byte(`{"parentUuid":"t-1","isSidechain":false,"cwd":"` + newDir + `","sessionId":"5a1e0000-0000-4000-8000-0000000000aa","version":"2.1.332","type":"user","message":{"role":"user","content":"continued"},"uuid":"u-2","timestamp":"2026-12-01T21:16:01.000Z"}` + "\n")
		grown := append(append([]byte(nil), file...), more...)
		r, err := follow.Resume(ctx, st, capture.FormatClaudeCode, path, grown)
		if err != nil {
			t.Fatalf("%s: %v", newDir, err)
		}
		if r.Lines.Offset() != int64(len(file)) || r.Remapped["/home/a/proj"] != newDir || r.Remapped["/home/a/proj/sub"] != newDir+"/sub" || len(r.Replay) != 0 {
			t.Fatalf("%s: offset %d (want %d), remapped %v, %d to replay", newDir, r.Lines.Offset(), len(file), r.Remapped, len(r.Replay))
		}
		var changed *follow.ChangedError
		for name, d := range map[string][]byte{
			"the conversation changed": bytes.Replace(grown, []byte("pelican"), []byte("penguin"), 1),
			"one directory two ways":   bytes.Replace(grown, []byte(`"cwd":"`+newDir+`","sessionId":"5a1e0000-0000-4000-8000-0000000000aa","version":"2.1.39"`), []byte(`"cwd":"/elsewhere","sessionId":"5a1e0000-0000-4000-8000-0000000000aa","version":"2.1.39"`), 1),
		} {
			if _, err := follow.Resume(ctx, st, capture.FormatClaudeCode, path, d); !errors.As(err, &changed) {
				t.Errorf("%s, %s: %v, want a *ChangedError", newDir, name, err)
			}
		}
		// An import of the restored, grown file continues the session.
		if newDir == "/b" {
			res, err := follow.Import(ctx, st, capture.FormatClaudeCode, path, grown)
			if err != nil || !res.Continued() {
				t.Fatalf("import of the restored file: %+v %v", res, err)
			}
		}
	}
}
