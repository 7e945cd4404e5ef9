package feedcommit

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/feed"
	"github.com/dshq/dshq/projection"
	"github.com/dshq/dshq/record"

	"github.com/dshq/dshq/internal/golden"
)

// lookup is a Lookup over fixed sessions (FromCommit is pure; a real
// projection.Snapshot answers the same two questions).
type lookup struct {
	sessions map[string]dshq.SessionInfo
	live     map[string]bool
}

func (l lookup) Session(id string) (dshq.SessionInfo, bool) {
	s, ok := l.sessions[id]
	return s, ok
}

func (l lookup) IsLive(id string) bool { return l.live[id] }

func info(t *testing.T, id string, cwd *string, headerSeq uint64) dshq.SessionInfo {
	t.Helper()
	tok, err := record.SubjectToken(id)
	if err != nil {
		t.Fatal(err)
	}
	return dshq.SessionInfo{
		Header:    dshq.HeaderRecord{Header: dshq.Header{Version: 2, ID: id, CreatedAt: 1788000000000, Cwd: cwd}, FormatVersion: 0, InheritedEventCount: 3},
		Token:     tok,
		HeaderSeq: headerSeq,
	}
}

func committed(t *testing.T, s dshq.SessionInfo, seq int64, streamSeq uint64, raw, text string, surface dshq.Surface) projection.CommittedEvent {
	env := struct {
		Type string `json:"type"`
		Time int64  `json:"time"`
	}{Type: dshq.TypeUserMessage} // what an undecodable record is taken for
	_ = json.Unmarshal([]byte(raw), &env)
	return projection.CommittedEvent{
		SearchDocument: dshq.SearchDocument{
			EventRecord: dshq.EventRecord{SessionID: s.Header.Header.ID, Seq: seq, Type: env.Type, Time: env.Time, Surface: surface},
			Text:        text,
		},
		Token: s.Token, Workspace: record.WorkspaceKey(s.Header.Header.Cwd), Raw: []byte(raw), StreamSeq: streamSeq,
	}
}

func sampleCommit(t *testing.T) (projection.Commit, lookup) {
	s1 := info(t, "s1", dshq.Str("/home/u/proj"), 10)
	s2 := info(t, "s2", nil, 9)
	hostile := info(t, "a.b c>", dshq.Str("/x.*"), 16)
	old := info(t, "old", dshq.Str("/other"), 2)
	by := int64(1)
	hostileRaw := append([]byte(`{"type":"session","id":"`), bytes.Repeat([]byte{0xff, 'A', 0xe6}, 400)...)
	c := projection.Commit{
		Generation: 17,
		Epoch:      "e1",
		Sessions:   []dshq.SessionInfo{s1, s2, hostile},
		Events: []projection.CommittedEvent{
			committed(t, s1, 0, 11, `{"type":"user/message","seq":0,"time":1788000000100,"data":{"content":[{"type":"text","text":"hi <there>"}]},"surfaceOp":"append"}`, "hi <there>", dshq.SurfaceCurrent),
			committed(t, s2, 0, 12, `{"type":"turn/start","seq":0,"time":1788000000100,"data":{"turn":1}}`, "", dshq.SurfaceLogOnly),
			func() projection.CommittedEvent {
				e := committed(t, s1, 1, 13, `{"type":"user/message","seq":1,`, "", "")
				e.Invalid = true
				return e
			}(),
			committed(t, hostile, 0, 17, `{"type":"user/message","seq":0,"time":1,"data":{},"surfaceOp":"append"}`, "", dshq.SurfaceCurrent),
		},
		Quarantined: []projection.QuarantineRecord{
			{StreamSeq: 14, Subject: "dsh.log.bad-hdr", Reason: "header record: unknown version 7", Raw: hostileRaw, Truncated: true},
			{StreamSeq: 15, Subject: "dsh.log.x.y", Reason: "not a session subject", Raw: []byte(`{}`)},
			{StreamSeq: 8, Subject: "dsh.log.old", SessionID: "old", Reason: "event seq 4 is not contiguous; expected 3", Raw: []byte(`{"type":"x","seq":4}`)},
			{StreamSeq: 7, Subject: "dsh.log.ghost", SessionID: "ghost", Reason: "header record: not an object", Raw: []byte(`[1]`)},
		},
		Reclassified: []projection.Reclassification{
			{SessionID: "s1", Seq: 0, Surface: dshq.SurfaceShadowed, ReplacedBy: &by},
			{SessionID: "old", Seq: 3, Surface: ""},
		},
		Titles: []projection.TitleChange{{SessionID: "s1", Title: dshq.Title{Title: "hi", MessageSeqs: []int64{0}, Source: []byte(`{"kind":"fallback"}`), EventSeq: 2, UpdatedAt: 5}}},
		Leases: []projection.LeaseChange{
			{Key: "pending", SessionID: "", Live: true},
			{Key: "s1", SessionID: "s1", Live: true},
			{Key: "nobody", SessionID: "nobody", Live: true},
			{Key: "old", SessionID: "old", Live: false},
		},
	}
	look := lookup{sessions: map[string]dshq.SessionInfo{"old": old}, live: map[string]bool{"s1": true}}
	return c, look
}

func TestACommitBecomesItsFeedMessagesInOrder(t *testing.T) {
	c, look := sampleCommit(t)
	msgs, err := FromCommit(c, look)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for i := range msgs {
		data, err := feed.Encode(&msgs[i])
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		buf.Write(data)
		buf.WriteByte('\n')
	}
	goldenFile(t, "commit.jsonl", buf.Bytes())
	for _, m := range msgs {
		if m.Generation != 17 {
			t.Fatalf("message %+v does not carry the commit's generation", m)
		}
		if m.Quarantine != nil && len(m.Quarantine.Excerpt) > feed.MaxExcerptBytes {
			t.Fatalf("quarantine excerpt is %d bytes", len(m.Quarantine.Excerpt))
		}
	}
}

func TestChangesOfUnknownSessionsAreErrors(t *testing.T) {
	tests := []struct {
		name   string
		commit projection.Commit
	}{
		{"a surface change of an unknown session", projection.Commit{Generation: 3,
			Reclassified: []projection.Reclassification{{SessionID: "nope", Seq: 1, Surface: dshq.SurfaceShadowed}}}},
		{"a title change of an unknown session", projection.Commit{Generation: 3,
			Titles: []projection.TitleChange{{SessionID: "nope"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := FromCommit(tt.commit, lookup{})
			if dshq.ErrorCode(err) != dshq.CodeSessionNotFound || !strings.Contains(err.Error(), `"nope"`) {
				t.Fatalf("error %v, want SESSION_NOT_FOUND naming the session", err)
			}
		})
	}
}

func TestLargeEventsAreFittedToTheSizeLimit(t *testing.T) {
	s := info(t, "s1", nil, 1)
	text := strings.Repeat("ü<>\x01", 500) // escapes make the JSON larger than the text
	raw := `{"type":"user/message","seq":0,"time":1,"data":{"text":"` + strings.Repeat("x", 3000) + `"},"surfaceOp":"append"}`
	tests := []struct {
		name          string
		max           int
		rawOmitted    bool
		textTruncated bool
		err           bool
	}{
		{"an event within the limit is whole", 1 << 20, false, false, false},
		{"an event over the limit loses its raw record first", 7000, true, false, false},
		{"an event still over the limit has its text cut", 2000, true, true, false},
		{"an event that cannot fit at all is an error", 200, false, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := projection.Commit{Generation: 2, Sessions: []dshq.SessionInfo{s},
				Events: []projection.CommittedEvent{committed(t, s, 0, 2, raw, text, dshq.SurfaceCurrent)}}
			msgs, err := FromCommit(c, nil, WithMaxMessageBytes(tt.max))
			if tt.err {
				if err == nil || dshq.ErrorCode(err) != dshq.CodeReplyTooLarge {
					t.Fatalf("error %v, want REPLY_TOO_LARGE", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ev := msgs[1]
			data, err := feed.Encode(&ev)
			if err != nil {
				t.Fatal(err)
			}
			if len(data) > tt.max {
				t.Fatalf("message is %d bytes, limit %d", len(data), tt.max)
			}
			if ev.Event.RawOmitted != tt.rawOmitted || ev.Event.TextTruncated != tt.textTruncated {
				t.Fatalf("rawOmitted=%v textTruncated=%v, want %v %v", ev.Event.RawOmitted, ev.Event.TextTruncated, tt.rawOmitted, tt.textTruncated)
			}
			if ev.Event.RawBytes != len(raw) || !strings.HasPrefix(text, ev.Event.Text) {
				t.Fatalf("rawBytes %d (want %d), or text is not a prefix of the original", ev.Event.RawBytes, len(raw))
			}
		})
	}
}

func goldenFile(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}
