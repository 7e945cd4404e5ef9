package engine_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/engine"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/shardhost"
	"github.com/dshq/dshq/shards"
)

// cursorPayload returns the JSON a cursor carries (before its MAC).
func cursorPayload(t *testing.T, cur string) map[string]json.RawMessage {
	t.Helper()
	text, _, _ := strings.Cut(cur, ".")
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// forgeCursor rewrites fields of an issued cursor's JSON and encodes it as
// a client that knows the format but not the key would: with the issued
// cursor's MAC, and (forms[1]) as the unsigned base64url of version 1.
func forgeCursor(t *testing.T, cur string, fields map[string]string) (forms [2]string) {
	t.Helper()
	m := cursorPayload(t, cur)
	for k, v := range fields {
		m[k] = json.RawMessage(v)
	}
	b, _ := json.Marshal(m)
	_, mac, _ := strings.Cut(cur, ".")
	forms[0] = base64.RawURLEncoding.EncodeToString(b) + "." + mac
	m["v"] = json.RawMessage("1")
	b, _ = json.Marshal(m)
	forms[1] = base64.RawURLEncoding.EncodeToString(b)
	return forms
}

// TestCursorsTheServiceDidNotIssueAreInvalid: cursors are authenticated
// with the deployment's key, so a forged generation is refused at once
// (it used to block the request for its whole timeoutMs, then fail
// NOT_CAUGHT_UP), a garbage order key or stored-results name is refused
// (the name used to reach a key-value subject), and another request's
// cursor is refused; the deployment's other engines continue its cursors.
func TestCursorsTheServiceDidNotIssueAreInvalid(t *testing.T) {
	p := newPipe(t)
	ctx := ctxT(t)
	for i := range 5 {
		id := fmt.Sprintf("s-%d", i)
		p.session(id, hdr{createdAt: int64(i + 1), cwd: "/w"})
		p.events(id, userMsg(int64(10+i), "needle in session "+id), userMsg(int64(20+i), "and more"))
	}
	gen := p.sync()
	list, err := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 2}, query.WithMinGeneration(gen))
	if err != nil || list.NextCursor == "" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	search, err := p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: "needle", Limit: 2})
	if err != nil || search.NextCursor == "" {
		t.Fatalf("search: %+v, %v", search, err)
	}
	events, err := p.client.ListEvents(ctx, dshq.SessionReadRequest{SessionID: "s-1", Limit: 1})
	if err != nil || events.NextCursor == "" {
		t.Fatalf("events: %+v, %v", events, err)
	}

	for _, tt := range []struct {
		name   string
		cursor string
		fields map[string]string
		call   func(cursor string) error
	}{
		{"a forged generation", list.NextCursor, map[string]string{"g": "1000000000000000"}, func(c string) error {
			_, err := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 2, Cursor: c}, query.WithTimeoutMs(3000))
			return err
		}},
		{"a garbage order key", list.NextCursor, map[string]string{"k": `"` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xff}, 40)) + `"`}, func(c string) error {
			_, err := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 2, Cursor: c})
			return err
		}},
		{"a forged offset", events.NextCursor, map[string]string{"o": "0"}, func(c string) error {
			_, err := p.client.ListEvents(ctx, dshq.SessionReadRequest{SessionID: "s-1", Limit: 1, Cursor: c})
			return err
		}},
		{"a stored-results name as long as a subject", search.NextCursor, map[string]string{"s": `"` + strings.Repeat("a", 5000) + `"`}, func(c string) error {
			_, err := p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: "needle", Limit: 2, Cursor: c})
			return err
		}},
	} {
		for i, form := range forgeCursor(t, tt.cursor, tt.fields) {
			t.Run(fmt.Sprintf("%s (%s) is INVALID_CURSOR at once", tt.name, []string{"signed as issued", "unsigned"}[i]), func(t *testing.T) {
				// At once: a request that waited for the forged generation
				// would end NOT_CAUGHT_UP at its timeoutMs, never
				// INVALID_CURSOR.
				wantErr(t, tt.call(form), dshq.CodeInvalidCursor, "cursor is invalid: ")
			})
		}
	}
	t.Run("another request's cursor is INVALID_CURSOR", func(t *testing.T) {
		_, err := p.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: "other", Limit: 2, Cursor: search.NextCursor})
		wantErr(t, err, dshq.CodeInvalidCursor, "cursor is invalid: it belongs to another request")
		_, err = p.client.ListEvents(ctx, dshq.SessionReadRequest{SessionID: "s-2", Limit: 1, Cursor: events.NextCursor})
		wantErr(t, err, dshq.CodeInvalidCursor, "cursor is invalid: it belongs to another request")
	})
	t.Run("the service still answers, and continues its own cursors", func(t *testing.T) {
		next, err := p.client.ListSessions(ctx, dshq.SessionListRequest{Limit: 2, Cursor: list.NextCursor})
		if err != nil || len(next.Items) != 2 || next.Items[0].Header.ID != "s-2" {
			t.Fatalf("next page: %+v, %v", next, err)
		}
	})
	t.Run("an engine of the same deployment continues a cursor; one of another does not", func(t *testing.T) {
		same, err := shardhost.NewShardEngine(ctx, p.js, p.proj)
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"limit":2,"cursor":%q}`, list.NextCursor)
		if _, err := run(t, same, wire.EndpointSessionsList, body); err != nil {
			t.Fatalf("same deployment: %v", err)
		}
		other := engine.New(shardhost.Local(p.proj))
		_, err = run(t, other, wire.EndpointSessionsList, body)
		wantErr(t, err, dshq.CodeInvalidCursor, "cursor is invalid: it was not issued by this service")
	})
}

// TestLoadCursorKey: the deployment's key is made once, by whichever
// process starts first, and read by every other.
func TestLoadCursorKey(t *testing.T) {
	p := newPipe(t)
	ctx := context.Background()
	before, err := shards.LoadCursorKey(ctx, p.js, 1) // newPipe's shard made it
	if err != nil {
		t.Fatal(err)
	}
	if err := p.js.DeleteKeyValue(ctx, dshq.KeyBucket); err != nil {
		t.Fatal(err)
	}
	keys := make([]wire.CursorKey, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := shards.LoadCursorKey(ctx, p.js, 1)
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys {
		if len(k) != wire.CursorKeyBytes || !bytes.Equal(k, keys[0]) {
			t.Fatalf("processes starting at once loaded different keys: %x", keys)
		}
	}
	if bytes.Equal(keys[0], before) {
		t.Fatal("a new bucket has the old key")
	}
	kv, err := p.js.KeyValue(ctx, dshq.KeyBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, dshq.CursorKeyName, []byte("short")); err != nil {
		t.Fatal(err)
	}
	if _, err := shards.LoadCursorKey(ctx, p.js, 1); err == nil || !strings.Contains(err.Error(), "is 5 bytes") {
		t.Fatalf("a damaged key loads: %v", err)
	}
}
