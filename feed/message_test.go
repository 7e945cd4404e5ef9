package feed

import (
	"errors"
	"strings"
	"testing"

	"github.com/dshq/dshq"
)

// sampleMessages is one message of every kind, as the protocol document
// shows them (testdata/messages/<kind>.json).
func sampleMessages(t testing.TB) []Message {
	cwd := "/home/u/proj"
	ws, tok := wsOf(cwd), tokenOf(t, "s-7f3c")
	base := func(k Kind) Message {
		return Message{V: Version, Kind: k, Generation: 42, Workspace: ws, Token: tok, SessionID: "s-7f3c"}
	}
	depth := int64(0)
	session := base(KindSession)
	session.Session = &SessionBody{
		SessionRecord: dshq.SessionRecord{
			Header: dshq.Header{Version: 2, ID: "s-7f3c", CreatedAt: 1788000000000, Cwd: &cwd, DelegationDepth: &depth},
			Live:   true, Persisted: true,
		},
	}
	event := base(KindEvent)
	raw := `{"type":"user/message","seq":1,"time":1788000000101,"data":{"id":"m-u1","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"Find where the retry budget is configured <b>"}]},"surfaceOp":"append"}`
	event.Event = &EventBody{
		EventRecord: dshq.EventRecord{SessionID: "s-7f3c", Seq: 1, Type: dshq.TypeUserMessage, Time: 1788000000101, Surface: dshq.SurfaceCurrent},
		Text:        "Find where the retry budget is configured <b>", Raw: []byte(raw), RawBytes: len(raw),
	}
	surface := base(KindSurface)
	by := int64(15)
	surface.Surface = &SurfaceBody{Seq: 5, From: "current", To: "shadowed", ReplacedBy: &by}
	title := base(KindTitle)
	title.Title = &dshq.Title{Title: "Find where the retry budget", MessageSeqs: []int64{1},
		Source: []byte(`{"kind":"fallback"}`), EventSeq: 2, UpdatedAt: 1788000000102}
	lease := base(KindLease)
	lease.Lease = &LeaseBody{Live: false}
	quarantine := Message{V: Version, Kind: KindQuarantine, Generation: 43, Workspace: QuarantineWorkspace, Token: "x-9",
		Quarantine: &QuarantineBody{StreamSeq: 43, Subject: "dsh.log.x-9", Reason: "header record: unknown version 7",
			Excerpt: `{"type":"session","version":7,"id":"x-9"}`, RawBytes: 41}}
	return []Message{session, event, surface, title, lease, quarantine}
}

func TestEveryKindEncodesAsDocumented(t *testing.T) {
	for _, m := range sampleMessages(t) {
		t.Run("a "+string(m.Kind)+" message", func(t *testing.T) {
			data, err := Encode(&m)
			if err != nil {
				t.Fatal(err)
			}
			goldenFile(t, "messages/"+string(m.Kind)+".json", append(data, '\n'))
			back, err := Decode(data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if identity(t, *back) != string(data) {
				t.Fatalf("round trip changed the message:\n%s\n%s", identity(t, *back), data)
			}
		})
	}
}

func TestDecodeRefusesWhatIsNotAFeedMessage(t *testing.T) {
	event := `"kind":"event","generation":1,"workspace":"_","token":"s","sessionId":"s","event":{"sessionId":"s","seq":0,"type":"x","time":0,"surface":"log-only","rawBytes":0}`
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty input is refused", ``, "not valid JSON"},
		{"a JSON array is refused", `[]`, "cannot unmarshal"},
		{"another version is refused", `{"v":2,` + event + `}`, "version 2"},
		{"an unknown kind is refused", `{"v":1,"kind":"bogus","generation":1,"workspace":"_","token":"s","sessionId":"s"}`, `unknown kind "bogus"`},
		{"a message without its body is refused", `{"v":1,"kind":"lease","generation":1,"workspace":"_","token":"s","sessionId":"s"}`, "no lease body"},
		{"a message with a second body is refused", `{"v":1,` + event + `,"lease":{"live":true}}`, "carries a lease body"},
		{"a workspace that is not a key is refused", `{"v":1,"kind":"lease","generation":1,"workspace":"ABC","token":"s","sessionId":"s","lease":{"live":true}}`, "not a workspace key"},
		{"the quarantine workspace is refused for other kinds", `{"v":1,"kind":"lease","generation":1,"workspace":"_q","token":"s","sessionId":"s","lease":{"live":true}}`, "quarantine workspace"},
		{"a token that is not the session's is refused", `{"v":1,"kind":"lease","generation":1,"workspace":"_","token":"t","sessionId":"s","lease":{"live":true}}`, "is not the token"},
		{"a token with a dot is refused", `{"v":1,"kind":"lease","generation":1,"workspace":"_","token":"a.b","sessionId":"a.b","lease":{"live":true}}`, "token"},
		{"a session id with a control character is refused", `{"v":1,"kind":"lease","generation":1,"workspace":"_","token":"s","sessionId":"s\u0001","lease":{"live":true}}`, "control character"},
		{"a message without session outside the quarantine workspace is refused", `{"v":1,"kind":"quarantine","generation":1,"workspace":"_","token":"s","quarantine":{"streamSeq":1,"subject":"x","reason":"r","excerpt":"","rawBytes":0}}`, "no session id"},
		{"an event body of another session is refused", `{"v":1,"kind":"event","generation":1,"workspace":"_","token":"s","sessionId":"s","event":{"sessionId":"t","seq":0,"type":"x","time":0,"surface":"log-only","rawBytes":0}}`, "is not the message's session"},
		{"a negative event seq is refused", `{"v":1,"kind":"event","generation":1,"workspace":"_","token":"s","sessionId":"s","event":{"sessionId":"s","seq":-1,"type":"x","time":0,"surface":"log-only","rawBytes":0}}`, "negative"},
		{"an unknown surface is refused", `{"v":1,"kind":"surface","generation":1,"workspace":"_","token":"s","sessionId":"s","surface":{"seq":1,"to":"gone"}}`, "unknown surface"},
		{"a negative generation is refused", `{"v":1,"kind":"lease","generation":-1,"workspace":"_","token":"s","sessionId":"s","lease":{"live":true}}`, "cannot unmarshal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode([]byte(tt.in))
			if err == nil {
				t.Fatalf("decoded %+v", m)
			}
			if !errors.Is(err, ErrMalformed) || dshq.ErrorCode(err) != dshq.CodeInvalidRequest {
				t.Fatalf("error %v is not a malformed-message error", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestSubjectsKeepEveryPartInItsToken(t *testing.T) {
	tests := []struct {
		name    string
		ws, tok string
		kind    Kind
		want    string
		wantErr string
	}{
		{"a plain session in a workspace", wsOf("/p"), "s-1", KindEvent, "dsh.feed." + wsOf("/p") + ".s-1.event", ""},
		{"a session without cwd", "_", "s-1", KindLease, "dsh.feed._.s-1.lease", ""},
		{"an encoded token", wsOf("/p"), tokenOf(t, "a.b >"), KindTitle, "dsh.feed." + wsOf("/p") + "." + tokenOf(t, "a.b >") + ".title", ""},
		{"a refused record of no session", QuarantineWorkspace, UnknownToken, KindQuarantine, "dsh.feed._q.!.quarantine", ""},
		{"a workspace with a dot is refused", "a.b", "s", KindEvent, "", "not a workspace key"},
		{"a wildcard workspace is refused", "*", "s", KindEvent, "", "not a workspace key"},
		{"an uppercase workspace key is refused", strings.ToUpper(wsOf("/p")), "s", KindEvent, "", "not a workspace key"},
		{"a wildcard token is refused", "_", ">", KindEvent, "", "token"},
		{"the unknown token outside quarantine is refused", "_", UnknownToken, KindEvent, "", "token"},
		{"an unknown kind is refused", "_", "s", Kind("x"), "", "unknown kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Subject(tt.ws, tt.tok, tt.kind)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("subject = %q, %v; want an error saying %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("subject = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestFilterSubjects(t *testing.T) {
	ws := wsOf("/p")
	tests := []struct {
		name    string
		f       Filter
		want    string
		wantErr bool
	}{
		{"the empty filter covers the feed", Filter{}, "dsh.feed.>", false},
		{"a workspace filter covers the workspace", Filter{Workspace: ws}, "dsh.feed." + ws + ".>", false},
		{"a session filter covers the session in any workspace", Filter{SessionID: "a.b"}, "dsh.feed.*." + tokenOf(t, "a.b") + ".>", false},
		{"one kind narrows the subject", Filter{Workspace: ws, Kinds: []Kind{KindEvent}}, "dsh.feed." + ws + ".*.event", false},
		{"several kinds are filtered after delivery", Filter{Workspace: ws, Kinds: []Kind{KindEvent, KindLease}}, "dsh.feed." + ws + ".>", false},
		{"the quarantine workspace is a filter", Filter{Workspace: QuarantineWorkspace}, "dsh.feed._q.>", false},
		{"a bad workspace is refused", Filter{Workspace: "x.>"}, "", true},
		{"an invalid session id is refused", Filter{SessionID: "a\x00"}, "", true},
		{"an unknown kind is refused", Filter{Kinds: []Kind{"x"}}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.f.Subject()
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("subject = %q, %v; want %q (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages(f) {
		data, err := Encode(&m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("refusal %v does not wrap ErrMalformed", err)
			}
			return
		}
		again, err := Encode(m)
		if err != nil {
			t.Fatalf("a decoded message does not encode: %v", err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("a re-encoded message does not decode: %v", err)
		}
	})
}
