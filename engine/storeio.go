package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/query/wire"
)

// storeIO is one request's traffic with the CursorStore, kept outside its
// snapshot. A snapshot is a read transaction of the projection's store, and
// the CursorStore is a key-value bucket over NATS whose calls ride out a
// leader election (seconds): a call made inside the snapshot would hold the
// transaction that long, and the projector's next commit that grows the
// store's file waits for every open transaction (bbolt remaps its file),
// while every later read waits behind that commit. One search then froze
// the projection and every other request with it. So a later page's stored
// hits are read before the snapshot (preload) and a first page's are
// written after it (flush), before the reply that names them leaves.
type storeIO struct {
	loaded  map[string]loadedValue
	pending []storedValue
}

type loadedValue struct {
	b   []byte
	err error
}

type storedValue struct {
	key   string
	value []byte
}

// withStoreIO returns a copy of e for one request, with its own storeIO.
func (e *Engine) withStoreIO() *Engine {
	rq := *e
	rq.io = &storeIO{}
	return &rq
}

// put stores value under key: after the snapshot for a request's engine
// (withStoreIO), at once otherwise.
func (e *Engine) put(ctx context.Context, key string, value []byte) error {
	if e.io == nil {
		return e.store.Put(ctx, key, value)
	}
	e.io.pending = append(e.io.pending, storedValue{key, value})
	return nil
}

// get returns the value under key: as preloaded when it was, from the
// store otherwise (and remembered, failures included).
func (e *Engine) get(ctx context.Context, key string) ([]byte, error) {
	if e.io == nil {
		return e.store.Get(ctx, key)
	}
	if v, ok := e.io.loaded[key]; ok {
		return v.b, v.err
	}
	b, err := e.store.Get(ctx, key)
	if e.io.loaded == nil {
		e.io.loaded = map[string]loadedValue{}
	}
	e.io.loaded[key] = loadedValue{b, err}
	return b, err
}

// preload reads, before the snapshot, the stored hits a later page of req
// will read (continueSearch): its cursor's meta and the chunks from its
// position for req.Limit hits. They depend on the cursor alone. A failure
// is remembered and reported in order by the page itself; a cursor this
// engine did not issue reads nothing.
func (e *Engine) preload(ctx context.Context, req *wire.Request) {
	if req.Cursor == "" || e.io == nil {
		return
	}
	c, err := wire.DecodeCursor(e.cursorKey, req)
	if err != nil || c.Store == "" || c.Position >= c.Bound {
		return
	}
	var meta searchMeta
	if e.load(ctx, c.Store+".m", &meta) != nil || !meta.Keys {
		return
	}
	_, _ = storedRun[HitKey](ctx, e, c, meta, req.Limit)
}

// flush writes the hits the request stored (storeHits), in order.
func (e *Engine) flush(ctx context.Context) error {
	if e.io == nil {
		return nil
	}
	for _, v := range e.io.pending {
		if err := e.store.Put(ctx, v.key, v.value); err != nil {
			return &dshq.Error{Code: dshq.CodeIndexFailed, Message: "store search results: " + err.Error(), Err: err}
		}
	}
	e.io.pending = nil
	return nil
}

// load decodes the stored value under key into v.
func (e *Engine) load(ctx context.Context, key string, v any) error {
	b, err := e.get(ctx, key)
	return decodeStored(b, err, v)
}

// loadStored decodes the stored value under key of store into v.
func loadStored(ctx context.Context, store CursorStore, key string, v any) error {
	b, err := store.Get(ctx, key)
	return decodeStored(b, err, v)
}

func decodeStored(b []byte, err error, v any) error {
	if errors.Is(err, ErrCursorExpired) {
		return dshq.Errorf(dshq.CodeStaleCursor, "cursor is stale because its stored results expired")
	}
	if err != nil {
		return &dshq.Error{Code: dshq.CodeIndexFailed, Message: "load search results: " + err.Error(), Err: err}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return dshq.Errorf(dshq.CodeInvalidCursor, "cursor is invalid: its stored results are unreadable")
	}
	return nil
}
