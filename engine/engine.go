package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
	"github.com/dshq/dshq/usage"
)

// Engine defaults.
const (
	// DefaultMaxReplyBytes is the reply budget when none is set: the default
	// NATS max payload less room for headers.
	DefaultMaxReplyBytes = 1<<20 - wire.ReplyHeadroom
	// MaxSearchResults is how many hits a search ranks on its first page
	// (when it has more than one page) and keeps, in chunks of at most
	// 256 KiB in the CursorStore, for its later pages: a trusted client
	// pages through up to this many hits, as of the first page. When a
	// search matches more, the page that reaches the bound still carries a
	// nextCursor, and following it fails with SESSION_QUERY_REPLY_TOO_LARGE
	// saying the result set is too large to page (narrow the query or add
	// filters): ranking later hits afresh would not be as of the first page,
	// since BM25 scores move with every append. Ranking a window costs the
	// index roughly in proportion to its size; WithMaxSearchResults changes
	// it.
	MaxSearchResults = 10000
	// cursorReserve is room kept in a page for its nextCursor.
	cursorReserve = 2 << 10
)

// Engine answers normalized requests against a projection snapshot. It is
// hosted by the projector (ServeShard); it holds no state of its own beyond
// the stored hits of paged searches (in its CursorStore). It is safe for
// concurrent use.
type Engine struct {
	src      Source
	store    CursorStore
	maxReply int
	// maxResults is how many hits a search ranks and keeps.
	maxResults int
	// cursorKey authenticates the cursors the engine issues.
	cursorKey wire.CursorKey
	// keyOf, when set, returns cursorKey when a request first needs it.
	keyOf func(ctx context.Context) (wire.CursorKey, error)
	// io is a request's CursorStore traffic (withStoreIO; nil on the
	// engine itself).
	io *storeIO
	// usageDims keeps the sessions' usage dimensions between usage
	// reports (engine/usage.go).
	usageDims *usage.DimsCache
}

// Option configures an Engine.
type Option func(*Engine)

// WithCursorStore sets where paged searches keep their hits (default: an
// in-memory store private to this Engine).
func WithCursorStore(s CursorStore) Option { return func(e *Engine) { e.store = s } }

// WithMaxSearchResults sets how many hits a search ranks on its first page
// and keeps for later pages (default MaxSearchResults).
func WithMaxSearchResults(n int) Option { return func(e *Engine) { e.maxResults = n } }

// WithCursorKey sets the key that authenticates cursors (default: a random
// key private to this Engine, so that only it continues its cursors). Every
// engine of a deployment shares one: LoadCursorKey.
func WithCursorKey(k wire.CursorKey) Option { return func(e *Engine) { e.cursorKey = k } }

// WithCursorKeyFunc makes the engine read the deployment's cursor key with
// key when a request first needs it (a query service may start before the
// first projector has created it); until key succeeds, requests fail with
// its failure.
func WithCursorKeyFunc(key func(ctx context.Context) (wire.CursorKey, error)) Option {
	return func(e *Engine) { e.keyOf = key }
}

// WithMaxReplyBytes sets the reply budget (default DefaultMaxReplyBytes).
func WithMaxReplyBytes(n int) Option { return func(e *Engine) { e.maxReply = n } }

// New returns an Engine over src.
func New(src Source, opts ...Option) *Engine {
	e := &Engine{src: src, maxReply: DefaultMaxReplyBytes, maxResults: MaxSearchResults, usageDims: usage.NewDimsCache(usageDimsMax)}
	for _, o := range opts {
		o(e)
	}
	if e.store == nil {
		e.store = NewMemoryCursorStore(CursorTTL)
	}
	if e.cursorKey == nil && e.keyOf == nil {
		e.cursorKey = wire.NewCursorKey()
	}
	return e
}

type handler func(e *Engine, ctx context.Context, snap Snapshot, req *wire.Request) (any, error)

var handlers = map[string]handler{
	wire.EndpointSessionsList:     (*Engine).listSessions,
	wire.EndpointSessionsFilter:   (*Engine).listSessions,
	wire.EndpointSessionsSearch:   (*Engine).searchSessions,
	wire.EndpointSessionsRead:     (*Engine).readSession,
	wire.EndpointSessionsSurface:  (*Engine).readSurface,
	wire.EndpointSessionsTrace:    (*Engine).traceSession,
	wire.EndpointSessionsTitles:   (*Engine).readTitles,
	wire.EndpointSessionsStat:     (*Engine).statSession,
	wire.EndpointSessionsChildren: (*Engine).readChildren,
	wire.EndpointCorpusStats:      (*Engine).corpusStats,
	wire.EndpointSessionsRank:     (*Engine).rankSessions,
	wire.EndpointSessionsHits:     (*Engine).sessionsHits,
	wire.EndpointEventsList:       (*Engine).listEvents,
	wire.EndpointEventsFilter:     (*Engine).listEvents,
	wire.EndpointEventsSearch:     (*Engine).searchEvents,
	wire.EndpointEventsRead:       (*Engine).readEvent,
	wire.EndpointEventsTrace:      (*Engine).traceEvent,
	wire.EndpointUsageReport:      (*Engine).usageReport,
}

// Run answers req and returns the reply body (JSON, at most the reply
// budget). Failures are *dshq.Error: besides the codes of each endpoint,
// SESSION_QUERY_NOT_CAUGHT_UP when the projection does not reach
// req.MinGeneration within req.TimeoutMs, SESSION_QUERY_REPLY_TOO_LARGE for
// an unpageable reply over the budget, and SESSION_QUERY_PERSISTENCE_FAILED
// when the projection cannot be read.
func (e *Engine) Run(ctx context.Context, req *wire.Request) ([]byte, error) {
	h, ok := handlers[req.Endpoint]
	if !ok {
		return nil, dshq.Errorf(dshq.CodeInvalidRequest, "unknown endpoint %s", dshq.Quote(req.Endpoint))
	}
	if !e.src.Searchable() && searchEndpoints[req.Endpoint] {
		return nil, searchDisabled()
	}
	if r, ok := e.src.(Router); ok && sessionEndpoints[req.Endpoint] {
		return r.Route(ctx, req)
	}
	e = e.withStoreIO()
	if e.cursorKey == nil {
		k, err := e.keyOf(ctx)
		if err != nil {
			return nil, err
		}
		e.cursorKey = k
	}
	e.preload(ctx, req)
	minGen := max(req.MinGeneration, e.peekCursorGeneration(req))
	timeout := req.TimeoutMs
	if timeout <= 0 {
		timeout = dshq.DefaultTimeoutMs
	}
	waitCtx, cancel := context.WithTimeout(ctx, msDuration(timeout))
	defer cancel()
	var out []byte
	called := false
	err := e.src.View(waitCtx, minGen, func(snap Snapshot) error {
		called = true
		reply, err := h(e, ctx, snap, req)
		if err != nil {
			return err
		}
		out, err = wire.EncodeReply(reply)
		if err != nil {
			return fmt.Errorf("encode reply: %w", err)
		}
		limit := e.maxReply
		if req.Endpoint == wire.EndpointEventsRead {
			limit = e.targetLimit()
		}
		if len(out) > limit {
			return dshq.Errorf(dshq.CodeReplyTooLarge, "%s reply would be %d bytes; the reply limit is %d bytes", req.Endpoint, len(out), limit)
		}
		return nil
	})
	if err == nil {
		if err := e.flush(ctx); err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, e.mapError(ctx, err, called, minGen, timeout)
}

func (e *Engine) mapError(ctx context.Context, err error, called bool, minGen uint64, timeout int) error {
	var de *dshq.Error
	switch {
	case errors.As(err, &de):
		return err
	case !called && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		return &dshq.Error{Code: dshq.CodeNotCaughtUp, Err: err,
			Message: fmt.Sprintf("projection did not reach generation %d within %d ms", minGen, timeout)}
	case ctx.Err() != nil:
		return &dshq.Error{Code: dshq.CodeAborted, Message: "query was cancelled", Err: err}
	}
	return &dshq.Error{Code: dshq.CodePersistenceFailed, Message: "projection read failed: " + err.Error(), Err: err}
}

// peekCursorGeneration returns the first-page generation of req's cursor,
// so that a lagging replica waits until it has caught up with the first
// page: only of a cursor this service issued (the failure of another is
// reported in order, later), so a forged generation never makes a request
// wait.
func (e *Engine) peekCursorGeneration(req *wire.Request) uint64 {
	if req.Cursor == "" {
		return 0
	}
	c, err := wire.DecodeCursor(e.cursorKey, req)
	if err != nil {
		return 0
	}
	return c.Generation
}

// searchEndpoints are the endpoints that ask the index.
var searchEndpoints = map[string]bool{
	wire.EndpointSessionsSearch: true, wire.EndpointEventsSearch: true, wire.EndpointCorpusStats: true,
	wire.EndpointSessionsRank: true, wire.EndpointSessionsHits: true,
}

// sessionEndpoints are the endpoints of one session (req.SessionID), which
// a Router hands to the part that holds it.
var sessionEndpoints = map[string]bool{
	wire.EndpointSessionsRead: true, wire.EndpointSessionsSurface: true, wire.EndpointSessionsStat: true,
	wire.EndpointEventsList: true, wire.EndpointEventsFilter: true, wire.EndpointEventsSearch: true,
	wire.EndpointEventsRead: true, wire.EndpointEventsTrace: true,
}

func searchDisabled() error {
	return dshq.Errorf(dshq.CodeSearchDisabled, "search is disabled: this projection has no index")
}

// Answer runs req with a reply budget of at most maxReply bytes (0 = the
// engine's own): e as a query.Engine, in the process of a query service
// (query.WithEngine) or behind a shard service (package shardhost).
func (e *Engine) Answer(ctx context.Context, req *wire.Request, maxReply int) ([]byte, error) {
	if maxReply <= 0 || maxReply >= e.maxReply {
		return e.Run(ctx, req)
	}
	bounded := *e
	bounded.maxReply = maxReply
	return bounded.Run(ctx, req)
}

// corpusStats answers corpus.stats (a projection shard's endpoint): the
// index's BM25 statistics of the phrase.
func (e *Engine) corpusStats(ctx context.Context, snap Snapshot, req *wire.Request) (any, error) {
	st, err := snap.Index().CorpusStats(ctx, req.Query)
	if err != nil {
		return nil, indexFailed(err)
	}
	return wire.CorpusStatsReply{Stats: st, Generation: snap.Generation()}, nil
}

func notFound(id string) error {
	return dshq.Errorf(dshq.CodeSessionNotFound, "session %s was not found", dshq.Quote(id))
}

func invalidSurface(info dshq.SessionInfo) error {
	return dshq.Errorf(dshq.CodeInvalidSurface, "invalid session surface: session %q is invalid from seq %d: %s",
		info.Header.Header.ID, info.InvalidFrom, info.InvalidReason)
}

func staleCursor() error {
	return dshq.Errorf(dshq.CodeStaleCursor, "cursor is stale because its relevant corpus changed")
}

// lookup returns a session or SESSION_QUERY_SESSION_NOT_FOUND.
func lookup(snap Snapshot, id string) (dshq.SessionInfo, error) {
	info, ok, err := snap.Session(id)
	if err != nil {
		return info, fmt.Errorf("read session %q: %w", id, err)
	}
	if !ok {
		return info, notFound(id)
	}
	return info, nil
}

// sessionRecord returns the session's record: every projected session's header is
// in the stream (persisted); live while its lease is held.
func sessionRecord(snap Snapshot, info dshq.SessionInfo) dshq.SessionRecord {
	return dshq.SessionRecord{Header: info.Header.Header, Tenant: info.Tenant, Live: snap.IsLive(info.Header.Header.ID), Persisted: true}
}

// continueCursor decodes req's cursor and checks that it still describes
// the snapshot's build. A fresh request gets a new cursor at offset 0.
func (e *Engine) continueCursor(snap Snapshot, req *wire.Request) (c *wire.Cursor, first bool, err error) {
	if req.Cursor == "" {
		return wire.NewCursor(e.cursorKey, req, snap.Generation(), snap.Lineage()), true, nil
	}
	c, err = wire.DecodeCursor(e.cursorKey, req)
	if err != nil {
		return nil, false, err
	}
	if c.Lineage != snap.Lineage() {
		return nil, false, dshq.Errorf(dshq.CodeStaleCursor, "cursor is stale because the projection was rebuilt from another stream or by another version")
	}
	return c, false, nil
}

// encodedSize is the length of v's wire.EncodeReply.
func encodedSize(v any) int {
	if ev, ok := v.(dshq.Event); ok {
		if len(ev.Raw) == 0 {
			return len("null")
		}
		return len(ev.Raw) // stored compact, carried as is
	}
	b, _ := wire.EncodeReply(v)
	return len(b)
}

// targetLimit is the most an events.read reply may hold: the reply budget
// and the headroom it keeps for headers, which a success does not carry, so
// that a target as large as the bus accepts (its payload less 1 KiB) is
// read alone.
func (e *Engine) targetLimit() int { return e.maxReply + wire.ReplyHeadroom }

// sizer tracks the bytes of a page against the reply budget.
type sizer struct{ used, budget int }

func (e *Engine) sizer(empty any) *sizer {
	return &sizer{used: encodedSize(empty) + cursorReserve, budget: e.maxReply}
}

// add reports whether v still fits, and counts it when it does.
func (s *sizer) add(v any) bool {
	n := encodedSize(v)
	if s.used+n+1 > s.budget {
		return false
	}
	s.used += n + 1
	return true
}

func tooLargeItem(endpoint string) error {
	return dshq.Errorf(dshq.CodeReplyTooLarge, "%s: a single item is larger than the reply limit", endpoint)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
