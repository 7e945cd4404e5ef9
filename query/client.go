package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/failover"
	"github.com/dshq/dshq/internal/microhost"
	"github.com/dshq/dshq/query/wire"
)

// Client is a typed client of the trusted query API
// (docs/protocol.md#3-the-trusted-query-api) over NATS. Every method sends one
// request to dsh.query.v1.<endpoint> and returns the decoded reply; a failure
// the service reports is returned as a *dshq.Error whose Code is the
// Nats-Service-Error-Code of the reply. A Client is safe for concurrent use.
type Client struct {
	nc      *nats.Conn
	prefix  string
	timeout time.Duration
}

// DefaultClientTimeout bounds a call whose context has no deadline: the
// service's longest wait (MaxTimeoutMs) plus a margin.
const DefaultClientTimeout = time.Duration(dshq.MaxTimeoutMs)*time.Millisecond + 5*time.Second

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithSubjectPrefix sets the endpoint subject prefix (default
// dshq.QuerySubjectPrefix, "dsh.query.v1").
func WithSubjectPrefix(prefix string) ClientOption {
	return func(c *Client) { c.prefix = prefix }
}

// WithClientTimeout sets the timeout of a call whose context has no deadline.
func WithClientTimeout(d time.Duration) ClientOption {
	return func(c *Client) { c.timeout = d }
}

// NewClient returns a Client that talks over nc.
func NewClient(nc *nats.Conn, opts ...ClientOption) *Client {
	c := &Client{nc: nc, prefix: dshq.QuerySubjectPrefix, timeout: DefaultClientTimeout}
	for _, o := range opts {
		o(c)
	}
	return c
}

// CallOption sets the consistency fields every request may carry.
type CallOption func(*callOptions)

type callOptions struct {
	minGeneration *uint64
	timeoutMs     int
}

// WithMinGeneration asks the service to answer only once the projection has
// applied generation g (read-your-writes); it fails with
// SESSION_QUERY_NOT_CAUGHT_UP when the request's timeoutMs passes first.
func WithMinGeneration(g uint64) CallOption {
	return func(o *callOptions) { o.minGeneration = &g }
}

// WithTimeoutMs sets the request's timeoutMs (1..30000; default 5000).
func WithTimeoutMs(ms int) CallOption {
	return func(o *callOptions) { o.timeoutMs = ms }
}

// ListSessions calls sessions.list.
func (c *Client) ListSessions(ctx context.Context, req dshq.SessionListRequest, opts ...CallOption) (*dshq.SessionPage, error) {
	var out dshq.SessionPage
	return &out, c.call(ctx, wire.EndpointSessionsList, req, &out, opts)
}

// FilterSessions calls sessions.filter.
func (c *Client) FilterSessions(ctx context.Context, req dshq.SessionFilterRequest, opts ...CallOption) (*dshq.SessionPage, error) {
	var out dshq.SessionPage
	if req.Filters == nil {
		req.Filters = []dshq.Filter{}
	}
	return &out, c.call(ctx, wire.EndpointSessionsFilter, req, &out, opts)
}

// SearchSessions calls sessions.search.
func (c *Client) SearchSessions(ctx context.Context, req dshq.SessionSearchRequest, opts ...CallOption) (*dshq.SessionSearchPage, error) {
	var out dshq.SessionSearchPage
	return &out, c.call(ctx, wire.EndpointSessionsSearch, req, &out, opts)
}

// ReadSession calls sessions.read.
func (c *Client) ReadSession(ctx context.Context, req dshq.SessionReadRequest, opts ...CallOption) (*dshq.SessionRead, error) {
	var out dshq.SessionRead
	return &out, c.call(ctx, wire.EndpointSessionsRead, req, &out, opts)
}

// ReadSurface calls sessions.surface.
func (c *Client) ReadSurface(ctx context.Context, req dshq.SessionReadRequest, opts ...CallOption) (*dshq.SurfaceSnapshot, error) {
	var out dshq.SurfaceSnapshot
	return &out, c.call(ctx, wire.EndpointSessionsSurface, req, &out, opts)
}

// TraceSession calls sessions.trace.
func (c *Client) TraceSession(ctx context.Context, req dshq.SessionTraceRequest, opts ...CallOption) (*dshq.LineageTrace, error) {
	var out dshq.LineageTrace
	return &out, c.call(ctx, wire.EndpointSessionsTrace, req, &out, opts)
}

// ReadTitles calls sessions.titles.
func (c *Client) ReadTitles(ctx context.Context, req dshq.SessionTitlesRequest, opts ...CallOption) (*dshq.SessionTitles, error) {
	var out dshq.SessionTitles
	if req.SessionIDs == nil {
		req.SessionIDs = []string{}
	}
	return &out, c.call(ctx, wire.EndpointSessionsTitles, req, &out, opts)
}

// StatSession calls sessions.stat: the session's record and counters
// (event count, title, last step/start seq, invalid-from seq) at a cost
// independent of its log's length. A missing session is
// SESSION_QUERY_SESSION_NOT_FOUND.
func (c *Client) StatSession(ctx context.Context, req dshq.SessionStatRequest, opts ...CallOption) (*dshq.SessionStat, error) {
	var out dshq.SessionStat
	return &out, c.call(ctx, wire.EndpointSessionsStat, req, &out, opts)
}

// ListEvents calls events.list.
func (c *Client) ListEvents(ctx context.Context, req dshq.SessionReadRequest, opts ...CallOption) (*dshq.EventRecordPage, error) {
	var out dshq.EventRecordPage
	return &out, c.call(ctx, wire.EndpointEventsList, req, &out, opts)
}

// FilterEvents calls events.filter.
func (c *Client) FilterEvents(ctx context.Context, req dshq.EventFilterRequest, opts ...CallOption) (*dshq.SearchDocumentPage, error) {
	var out dshq.SearchDocumentPage
	if req.Filters == nil {
		req.Filters = []dshq.Filter{}
	}
	return &out, c.call(ctx, wire.EndpointEventsFilter, req, &out, opts)
}

// SearchEvents calls events.search.
func (c *Client) SearchEvents(ctx context.Context, req dshq.EventSearchRequest, opts ...CallOption) (*dshq.EventSearchPage, error) {
	var out dshq.EventSearchPage
	return &out, c.call(ctx, wire.EndpointEventsSearch, req, &out, opts)
}

// ReadEvent calls events.read. A reply that carries the target once
// (TargetOmitted) has its Target filled from Events.
func (c *Client) ReadEvent(ctx context.Context, req dshq.EventReadRequest, opts ...CallOption) (*dshq.EventWindow, error) {
	var out dshq.EventWindow
	if err := c.call(ctx, wire.EndpointEventsRead, req, &out, opts); err != nil {
		return &out, err
	}
	if out.TargetOmitted {
		i := req.Seq - out.StartSeq
		if i < 0 || i >= int64(len(out.Events)) {
			return &out, fmt.Errorf("%s: decode reply: the target (seq %d) is neither in target nor in events %d..%d", wire.EndpointEventsRead, req.Seq, out.StartSeq, out.EndSeq)
		}
		out.Target = out.Events[i]
	}
	return &out, nil
}

// TraceEvent calls events.trace.
func (c *Client) TraceEvent(ctx context.Context, req dshq.EventTraceRequest, opts ...CallOption) (*dshq.EventTrace, error) {
	var out dshq.EventTrace
	return &out, c.call(ctx, wire.EndpointEventsTrace, req, &out, opts)
}

// Raw sends body as is to endpoint and returns the reply body, or the
// service's failure as a *dshq.Error. It is for callers that relay JSON
// (the CLI's --json, the MCP adapter).
func (c *Client) Raw(ctx context.Context, endpoint string, body []byte) ([]byte, error) {
	return c.request(ctx, endpoint, body)
}

func (c *Client) call(ctx context.Context, endpoint string, req, out any, opts []CallOption) error {
	body, err := encodeRequest(req, opts)
	if err != nil {
		return fmt.Errorf("%s: encode request: %w", endpoint, err)
	}
	data, err := c.request(ctx, endpoint, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: decode reply: %w", endpoint, err)
	}
	return nil
}

// encodeRequest marshals req and adds minGeneration/timeoutMs.
func encodeRequest(req any, opts []CallOption) ([]byte, error) {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	body, err := json.Marshal(req)
	if err != nil || (o.minGeneration == nil && o.timeoutMs == 0) {
		return body, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, err
	}
	if o.minGeneration != nil {
		fields["minGeneration"], _ = json.Marshal(*o.minGeneration)
	}
	if o.timeoutMs != 0 {
		fields["timeoutMs"], _ = json.Marshal(o.timeoutMs)
	}
	return json.Marshal(fields)
}

func (c *Client) request(ctx context.Context, endpoint string, body []byte) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	msg, err := roundTrip(ctx, c.nc, c.prefix+"."+endpoint, c.prefix+"."+dshq.MovedEndpoint, body, nil, nil)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("%s: no query service is running: %w", endpoint, err)
		}
		return nil, fmt.Errorf("%s: %w", endpoint, err)
	}
	if err := microhost.DecodeError(msg); err != nil {
		return nil, err
	}
	return msg.Data, nil
}

// How roundTrip asks again while no service answers: a service instance
// whose server went away takes that long to be back on another one.
const (
	noRespondersFor   = time.Second
	noRespondersPause = 50 * time.Millisecond
)

// roundTrip sends a request to subject and returns its reply. The query API
// only reads, so a request may be sent more than once and the first reply
// is taken. It is sent again at once when this connection drops or comes
// back (a reply routed to the old server is lost) and when a service
// instance announces itself on moved (one that had the request may have
// lost it), and after a short pause while no service answers (one is moving
// to another server). A request that finds no service for noRespondersFor
// fails with nats.ErrNoResponders.
//
// gone, when not nil, is closed when the one service instance subject
// reaches is taken for gone: roundTrip then returns errReplicaGone.
func roundTrip(ctx context.Context, nc *nats.Conn, subject, moved string, body []byte, header nats.Header, gone <-chan struct{}) (*nats.Msg, error) {
	box, err := awaitReplies(nc)
	if err != nil {
		return nil, err
	}
	defer box.done()
	watch := failover.For(nc, moved)
	changed := watch.Changed()
	send := func() error {
		return nc.PublishMsg(&nats.Msg{Subject: subject, Reply: box.inbox, Data: body, Header: header})
	}
	if err := send(); err != nil {
		return nil, err
	}
	var (
		noResp     time.Time // since when no service answers; zero while one does
		pause      <-chan time.Time
		pauseTimer *time.Timer
	)
	defer func() {
		if pauseTimer != nil {
			pauseTimer.Stop()
		}
	}()
	for {
		select {
		case m := <-box.c:
			if m.Subject != box.inbox {
				continue // a late reply to an earlier request
			}
			if m.Header.Get("Status") != "503" || len(m.Data) > 0 {
				return m, nil
			}
			if noResp.IsZero() {
				noResp = time.Now()
			}
			if time.Since(noResp) >= noRespondersFor {
				return nil, nats.ErrNoResponders
			}
			if pause == nil {
				pauseTimer = time.NewTimer(noRespondersPause)
				pause = pauseTimer.C
			}
			continue
		case <-pause:
			pause, pauseTimer = nil, nil
		case <-changed:
			changed = watch.Changed()
		case <-gone:
			return nil, errReplicaGone
		case <-ctx.Done():
			if !noResp.IsZero() {
				return nil, nats.ErrNoResponders
			}
			return nil, ctx.Err()
		}
		if err := send(); err != nil {
			return nil, err
		}
	}
}
