package tools_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/tools"
)

// stalled never answers a search before its context ends, like a service
// stuck behind a long search; it answers the rest as the real service.
type stalled struct{ tools.Service }

func (s stalled) SearchSessions(ctx context.Context, _ dshq.SessionSearchRequest) (dshq.SessionSearchPage, error) {
	<-ctx.Done()
	return dshq.SessionSearchPage{}, ctx.Err()
}

func (s stalled) SearchEvents(ctx context.Context, _ dshq.EventSearchRequest) (dshq.EventSearchPage, error) {
	<-ctx.Done()
	return dshq.EventSearchPage{}, ctx.Err()
}

func TestSearchTimeout(t *testing.T) {
	svc := stalled{newService(t, fullCorpus)}
	tl := newTools(t, svc, tools.WithSearchTimeout(30*time.Millisecond))
	for _, tc := range []struct{ tool, args string }{
		{tools.NameSessionSearch, `{"query":"retry budget"}`},
		{tools.NameSessionEventSearch, `{"session_id":"s-7f3c","query":"retry budget"}`},
	} {
		t.Run(tc.tool+" stops at the search timeout with a clear error", func(t *testing.T) {
			r := call(t, tl, "s-caller", tc.tool, tc.args)
			wantError(t, r, dshq.CodeAborted, "Error: session search timed out after 30 ms")
		})
	}
	t.Run("the exact tools have no search timeout", func(t *testing.T) {
		r := call(t, tl, "s-caller", tools.NameSessionTrace, `{}`)
		if r.IsError {
			t.Fatal(r.Text)
		}
	})
	t.Run("the caller's cancellation is returned, not rendered", func(t *testing.T) {
		reason := errors.New("turn aborted by the user")
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(10*time.Millisecond, func() { cancel(reason) })
		long := newTools(t, svc)
		_, err := long.Call(ctx, tools.AsSession("s-caller"), tools.NameSessionSearch, []byte(`{"query":"retry budget"}`))
		if !errors.Is(err, reason) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestNewRefusesBadConfig(t *testing.T) {
	unused := tools.FromQueryClient(query.NewClient(nil)) // New refuses before any call
	for _, tc := range []struct {
		name string
		opts []tools.Option
	}{
		{"zero max results", []tools.Option{tools.WithMaxSearchResults(0)}},
		{"a zero timeout", []tools.Option{tools.WithSearchTimeout(0)}},
		{"a timeout above 2^31-1 ms", []tools.Option{tools.WithSearchTimeout(2147483648 * time.Millisecond)}},
		{"a nil logger", []tools.Option{tools.WithLogger(nil)}},
	} {
		t.Run(tc.name+" is an invalid config", func(t *testing.T) {
			if _, err := tools.New(unused, tc.opts...); dshq.ErrorCode(err) != dshq.CodeInvalidConfig {
				t.Fatalf("err = %v", err)
			}
		})
	}
	if _, err := tools.New(nil); dshq.ErrorCode(err) != dshq.CodeInvalidConfig {
		t.Fatalf("nil service: err = %v", err)
	}
}
