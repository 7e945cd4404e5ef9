package microhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/embedded"
	"github.com/dshq/dshq/internal/testnats"
)

func TestMain(m *testing.M) { testnats.VerifyNoLeaks(m) }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// conn starts an in-process server and returns a connection to it, both
// closed at the end of the test.
func conn(t *testing.T) *nats.Conn {
	t.Helper()
	return testnats.Start(t, embedded.Config{Sync: embedded.SyncRelaxed}).Conn(t)
}

func start(t *testing.T, nc *nats.Conn, cfg Config, eps ...Endpoint) *Service {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet()
	}
	s, err := Start(context.Background(), nc, cfg, eps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func request(t *testing.T, nc *nats.Conn, subject string, body string) *nats.Msg {
	t.Helper()
	msg, err := nc.Request(subject, []byte(body), 10*time.Second)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	return msg
}

// monitor asks verb of the instance s over NATS, as `nats micro` does.
func monitor[T any](t *testing.T, nc *nats.Conn, verb micro.Verb, name, id string) T {
	t.Helper()
	subject, err := micro.ControlSubject(verb, name, id)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(request(t, nc, subject, "").Data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStats_CountTheAnswersThemselves(t *testing.T) {
	nc := conn(t)
	const wait = 40 * time.Millisecond
	echo := func(_ context.Context, m *nats.Msg) ([]byte, error) { return m.Data, nil }
	s := start(t, nc, Config{Name: "test-svc", Description: "a test"},
		Endpoint{Name: "a.echo", Subject: "t.echo", Handler: echo},
		Endpoint{Name: "a.work", Subject: "t.work", Handler: func(ctx context.Context, m *nats.Msg) ([]byte, error) {
			// The answer takes wait after the handler's dispatch: a host
			// that timed only the hand-off would report microseconds.
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
			switch string(m.Data) {
			case "missing":
				return nil, dshq.Errorf(dshq.CodeSessionNotFound, "session %q was not found", "x")
			case "in-body":
				return []byte(`{"isError":true}`), InBody([]byte(`{"isError":true}`), dshq.Errorf(dshq.CodeToolUnauthorized, "not yours"))
			case "plain":
				return nil, errors.New("disk on fire")
			case "panic":
				panic("bug")
			}
			return []byte("done"), nil
		}})

	wantErrors := 0
	for _, body := range []string{"ok", "missing", "in-body", "plain", "panic", "missing", "ok"} {
		msg := request(t, nc, "t.work", body)
		failed := DecodeError(msg) != nil || string(msg.Data) == `{"isError":true}`
		if failed {
			wantErrors++
		}
		if body == "ok" && (failed || string(msg.Data) != "done") {
			t.Fatalf("ok: %q %v", msg.Data, msg.Header)
		}
	}
	if got := string(request(t, nc, "t.echo", "hi").Data); got != "hi" {
		t.Fatalf("echo %q", got)
	}

	st := monitor[micro.Stats](t, nc, micro.StatsVerb, "test-svc", s.ID())
	if st.Type != micro.StatsResponseType || st.Name != "test-svc" || st.ID != s.ID() || st.Version != dshq.ServiceVersion || st.Started.IsZero() {
		t.Fatalf("stats identity %+v", st.ServiceIdentity)
	}
	byName := map[string]*micro.EndpointStats{}
	for _, e := range st.Endpoints {
		byName[e.Name] = e
	}
	work, echoSt := byName["a_work"], byName["a_echo"]
	if work == nil || echoSt == nil || work.Subject != "t.work" || work.QueueGroup != dshq.ServiceQueueGroup {
		t.Fatalf("endpoints %+v", st.Endpoints)
	}
	t.Run("num_errors counts every failed answer, headers or in the body", func(t *testing.T) {
		if work.NumRequests != 7 || work.NumErrors != wantErrors || wantErrors != 5 {
			t.Fatalf("requests %d errors %d; the client saw 7 answers, %d failed", work.NumRequests, work.NumErrors, wantErrors)
		}
		if work.LastError != `SESSION_QUERY_SESSION_NOT_FOUND:session "x" was not found` {
			t.Fatalf("last error %q", work.LastError)
		}
		if echoSt.NumRequests != 1 || echoSt.NumErrors != 0 || echoSt.LastError != "" {
			t.Fatalf("echo stats %+v", echoSt)
		}
	})
	t.Run("processing time covers the whole answer", func(t *testing.T) {
		if work.AverageProcessingTime < wait || work.ProcessingTime < 7*wait ||
			work.AverageProcessingTime != work.ProcessingTime/time.Duration(work.NumRequests) {
			t.Fatalf("processing %v, average %v; each answer took at least %v", work.ProcessingTime, work.AverageProcessingTime, wait)
		}
	})
	t.Run("the data splits the errors by code", func(t *testing.T) {
		var d EndpointData
		if err := json.Unmarshal(work.Data, &d); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{string(dshq.CodeSessionNotFound): 2, string(dshq.CodeToolUnauthorized): 1, string(dshq.CodePersistenceFailed): 2}
		if d.Answered != 7 || d.Errors != 5 || !reflect.DeepEqual(d.ErrorsByCode, want) ||
			d.LastError != `SESSION_QUERY_SESSION_NOT_FOUND: session "x" was not found` || d.ProcessingTime != work.ProcessingTime {
			t.Fatalf("data %+v", d)
		}
	})
}

func TestFailures(t *testing.T) {
	nc := conn(t)
	start(t, nc, Config{Name: "fail-svc", Panicked: dshq.Errorf(dshq.CodeIndexFailed, "admin: internal error"),
		Failed: func(err error) *dshq.Error { return dshq.Errorf(dshq.CodeIndexFailed, "wrapped: %v", err) }},
		Endpoint{Name: "p", Subject: "f.p", Handler: func(context.Context, *nats.Msg) ([]byte, error) { panic("bug") }},
		Endpoint{Name: "e", Subject: "f.e", Handler: func(context.Context, *nats.Msg) ([]byte, error) {
			return nil, fmt.Errorf("read: %w", errors.New("gone"))
		}},
		Endpoint{Name: "d", Subject: "f.d", Handler: func(context.Context, *nats.Msg) ([]byte, error) {
			return nil, fmt.Errorf("wrapped: %w", dshq.Errorf(dshq.CodeInvalidLimit, "limit\nmust be 1..100"))
		}})
	for _, tt := range []struct{ subject, code, header, body string }{
		{"f.p", "SESSION_QUERY_INDEX_FAILED", "admin: internal error", `{"error":{"code":"SESSION_QUERY_INDEX_FAILED","message":"admin: internal error"}}`},
		{"f.e", "SESSION_QUERY_INDEX_FAILED", "wrapped: read: gone", `{"error":{"code":"SESSION_QUERY_INDEX_FAILED","message":"wrapped: read: gone"}}`},
		{"f.d", "SESSION_QUERY_INVALID_LIMIT", "limit must be 1..100", `{"error":{"code":"SESSION_QUERY_INVALID_LIMIT","message":"limit\nmust be 1..100"}}`},
	} {
		t.Run(tt.subject, func(t *testing.T) {
			msg := request(t, nc, tt.subject, "")
			if msg.Header.Get(micro.ErrorCodeHeader) != tt.code || msg.Header.Get(micro.ErrorHeader) != tt.header || string(msg.Data) != tt.body {
				t.Fatalf("answer %v %s", msg.Header, msg.Data)
			}
			var de *dshq.Error
			if err := DecodeError(msg); !errors.As(err, &de) || string(de.Code) != tt.code {
				t.Fatalf("decoded %v", err)
			}
		})
	}
	t.Run("the service still answers after a panic", func(t *testing.T) {
		if msg := request(t, nc, "f.p", ""); msg.Header.Get(micro.ErrorCodeHeader) == "" {
			t.Fatal("no error")
		}
	})
}

func TestWireErrorCodec(t *testing.T) {
	for _, e := range []*dshq.Error{
		{Code: dshq.CodeSessionNotFound, Message: `session "a" was not found`},
		{Code: dshq.CodeInvalidQuery, Message: "tab\there, newline\nthere, DEL\x7f, 中文"},
		{Code: dshq.CodeAborted, Message: ""},
	} {
		h, body := EncodeError(e)
		msg := &nats.Msg{Header: h, Data: body}
		got := DecodeError(msg)
		want := e.Message
		if want == "" {
			want = "error" // a header value is never empty
		}
		var de *dshq.Error
		if !errors.As(got, &de) || de.Code != e.Code || de.Message != want {
			t.Fatalf("round trip of %+v: %+v", e, got)
		}
		for _, r := range h.Get(micro.ErrorHeader) {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("header %q holds a control character", h.Get(micro.ErrorHeader))
			}
		}
		if h.Get(micro.ErrorHeader) == "" {
			t.Fatal("empty error header")
		}
	}
	if err := DecodeError(&nats.Msg{Data: []byte(`{"error":{"code":"X","message":"y"}}`)}); err != nil {
		t.Fatalf("a reply without the error header decoded as %v", err)
	}
	if err := DecodeError(&nats.Msg{Header: nats.Header{micro.ErrorCodeHeader: {"500"}, micro.ErrorHeader: {"boom"}}}); err == nil || err.Error() != "boom" {
		t.Fatalf("header-only error decoded as %v", err)
	}
}

func TestConcurrency(t *testing.T) {
	nc := conn(t)
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	var returned atomic.Bool
	s := start(t, nc, Config{Name: "conc", MaxInFlight: 2},
		Endpoint{Name: "e", Subject: "c.e", Handler: func(ctx context.Context, m *nats.Msg) ([]byte, error) {
			if string(m.Data) == "hold" {
				held <- struct{}{}
				defer returned.Store(true)
				select {
				case <-release:
				case <-ctx.Done():
					time.Sleep(20 * time.Millisecond) // a handler slow to notice; Stop must wait for it
					return nil, dshq.Errorf(dshq.CodeAborted, "cancelled")
				}
			}
			return m.Data, nil
		}})
	first, err := nc.RequestWithContext(context.Background(), "c.e", nil) // warm up
	if err != nil || first == nil {
		t.Fatal(err)
	}
	slow := make(chan *nats.Msg, 1)
	go func() {
		m, _ := nc.Request("c.e", []byte("hold"), 20*time.Second)
		slow <- m
	}()
	<-held
	t.Run("a request held in its handler does not hold up the next on the same endpoint", func(t *testing.T) {
		if got := string(request(t, nc, "c.e", "quick").Data); got != "quick" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("Stop cancels the handlers and waits for them", func(t *testing.T) {
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
		if !returned.Load() {
			t.Fatal("Stop returned before the held request's handler")
		}
		if m := <-slow; m == nil || m.Header.Get(micro.ErrorCodeHeader) != string(dshq.CodeAborted) {
			t.Fatalf("held request answered %v", m)
		}
	})
}

func TestMonitoring_SpeaksMicro(t *testing.T) {
	nc := conn(t)
	noop := func(context.Context, *nats.Msg) ([]byte, error) { return []byte("{}"), nil }
	ours := start(t, nc, Config{Name: "ours", Description: "same shape", Metadata: map[string]string{"shard": "0"}},
		Endpoint{Name: "x.list", Subject: "o.x.list", Handler: noop})
	theirs, err := micro.AddService(nc, micro.Config{Name: "theirs", Version: dshq.ServiceVersion, Description: "same shape",
		Metadata: map[string]string{"shard": "0"}, StatsHandler: func(*micro.Endpoint) any { return EndpointData{} }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = theirs.Stop() })
	if err := theirs.AddEndpoint("x_list", micro.HandlerFunc(func(r micro.Request) { _ = r.Respond([]byte("{}")) }),
		micro.WithEndpointSubject("m.x.list")); err != nil {
		t.Fatal(err)
	}
	request(t, nc, "o.x.list", "")
	request(t, nc, "m.x.list", "")

	for _, verb := range []micro.Verb{micro.PingVerb, micro.InfoVerb, micro.StatsVerb} {
		t.Run(verb.String()+" has micro's fields", func(t *testing.T) {
			got := monitor[map[string]any](t, nc, verb, "ours", ours.ID())
			want := monitor[map[string]any](t, nc, verb, "theirs", theirs.Info().ID)
			if a, b := keys(got), keys(want); !slices.Equal(a, b) {
				t.Fatalf("fields %v; micro's %v", a, b)
			}
			for _, k := range []string{"type", "version", "metadata", "description"} {
				if !reflect.DeepEqual(got[k], want[k]) {
					t.Fatalf("%s = %v; micro says %v", k, got[k], want[k])
				}
			}
		})
	}
	t.Run("every instance answers the all-services and the by-name subjects", func(t *testing.T) {
		info := monitor[micro.Info](t, nc, micro.InfoVerb, "ours", "")
		if info.ID != ours.ID() || len(info.Endpoints) != 1 || info.Endpoints[0].Name != "x_list" || info.Endpoints[0].Subject != "o.x.list" {
			t.Fatalf("info %+v", info)
		}
		sub, err := nc.SubscribeSync(nats.NewInbox())
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := nc.PublishRequest("$SRV.PING", sub.Subject, nil); err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for range 2 {
			m, err := sub.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var p micro.Ping
			if err := json.Unmarshal(m.Data, &p); err != nil {
				t.Fatal(err)
			}
			names[p.Name] = p.Version == dshq.ServiceVersion
		}
		if !names["ours"] || !names["theirs"] {
			t.Fatalf("pings %v", names)
		}
	})
}

// keys returns the JSON object's keys, and those of its first endpoint.
func keys(m map[string]any) []string {
	var out []string
	for k, v := range m {
		out = append(out, k)
		if list, ok := v.([]any); ok && k == "endpoints" && len(list) > 0 {
			for ek := range list[0].(map[string]any) {
				out = append(out, "endpoints."+ek)
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestStart_RefusesBadNames(t *testing.T) {
	nc := conn(t)
	noop := func(context.Context, *nats.Msg) ([]byte, error) { return nil, nil }
	for name, cfg := range map[string]Config{"a space": {Name: "a b"}, "empty": {Name: ""}} {
		if s, err := Start(context.Background(), nc, cfg, nil); err == nil {
			_ = s.Stop()
			t.Fatalf("%s service name accepted", name)
		}
	}
	if s, err := Start(context.Background(), nc, Config{Name: "ok"}, []Endpoint{{Name: "a b", Subject: "x", Handler: noop}}); err == nil {
		_ = s.Stop()
		t.Fatal("bad endpoint name accepted")
	}
}

// TestStart_ServesEveryConnectionOnReturn: when Start returns, the server
// has the service's subscriptions, so a request from another connection
// finds a responder at once (cmd/query's test saw "no responders" under load
// when Start returned with its subscriptions still in the client's buffer).
func TestStart_ServesEveryConnectionOnReturn(t *testing.T) {
	srv := testnats.Start(t, embedded.Config{Listen: "127.0.0.1:0", Sync: embedded.SyncRelaxed})
	host, client := srv.Dial(t), srv.Dial(t)
	echo := func(_ context.Context, m *nats.Msg) ([]byte, error) { return m.Data, nil }
	for i := range 200 {
		subject := fmt.Sprintf("ready.%d", i)
		s := start(t, host, Config{Name: "ready"}, Endpoint{Name: "e", Subject: subject, Handler: echo})
		if _, err := client.Request(subject, nil, 10*time.Second); err != nil {
			t.Fatalf("request %d right after Start: %v", i, err)
		}
		if err := s.Stop(); err != nil {
			t.Fatal(err)
		}
	}
}
