package query

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/dshq/dshq"
)

// cursorVersion is the version of the cursor encoding.
const cursorVersion = 1

// Cursor is the state a nextCursor carries: base64url of its JSON. It binds
// the canonical request (Fingerprint), the generation and projection epoch
// of the first page, and the position to continue from. The engine fills
// and reads it; its text is opaque to clients.
type Cursor struct {
	Version     int    `json:"v"`
	Endpoint    string `json:"e"`
	Fingerprint string `json:"f"`
	// Generation and Epoch are those of the first page.
	Generation uint64 `json:"g"`
	Epoch      string `json:"p"`
	// Offset is the position to continue from: the next seq (events.list,
	// events.filter, sessions.read), the next surface index
	// (sessions.surface) or the next stored hit (search).
	Offset json.Number `json:"o"`
	// Bound is the size of the list at the first page: the session's event
	// count, its surface length, or the number of stored hits.
	Bound int64 `json:"n,omitempty"`
	// Key is the order key of the last session returned (sessions.list,
	// sessions.filter).
	Key []byte `json:"k,omitempty"`
	// Captured is capturedThroughSeq at the first page (sessions.surface;
	// -1 for null).
	Captured int64 `json:"c,omitempty"`
	// Store names the stored hits of a search.
	Store string `json:"s,omitempty"`

	// Position is Offset, decoded and checked by DecodeCursor.
	Position int64 `json:"-"`
}

// encode returns the opaque cursor text.
func (c *Cursor) encode() string {
	c.Version = cursorVersion
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor decodes req.Cursor as a cursor of req. Any malformation,
// another endpoint or another request (by fingerprint) is
// SESSION_QUERY_INVALID_CURSOR.
func DecodeCursor(req *Request) (*Cursor, error) {
	invalid := func(why string) error {
		return dshq.Errorf(dshq.CodeInvalidCursor, "cursor is invalid: %s", why)
	}
	raw, err := base64.RawURLEncoding.DecodeString(req.Cursor)
	if err != nil {
		return nil, invalid("not base64url")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var c Cursor
	if err := dec.Decode(&c); err != nil || dec.More() {
		return nil, invalid("not a cursor")
	}
	if c.Version != cursorVersion {
		return nil, invalid("unknown version")
	}
	if c.Endpoint != req.Endpoint {
		return nil, invalid("it belongs to another endpoint")
	}
	if c.Fingerprint != fingerprint(req) {
		return nil, invalid("it belongs to another request")
	}
	off, ok := safeInteger(json.RawMessage(c.Offset))
	if !ok || off < 0 || c.Bound < 0 || (c.Bound > 0 && off > c.Bound) {
		return nil, invalid("offset out of range")
	}
	c.Position = off
	return &c, nil
}

// fingerprint is the canonical normalized request a cursor is bound to:
// reordered filters or values, or an omitted default limit, give the same
// fingerprint; any other change does not (docs/search.md#cursors-and-staleness).
func fingerprint(req *Request) string {
	b, _ := json.Marshal(struct {
		Endpoint       string            `json:"e"`
		SessionID      string            `json:"s"`
		Query          string            `json:"q"`
		Filters        []json.RawMessage `json:"f"`
		SessionFilters []json.RawMessage `json:"sf"`
		EventFilters   []json.RawMessage `json:"ef"`
		Limit          int               `json:"l"`
	}{req.Endpoint, req.SessionID, req.Query, canonicalFilters(req.Filters),
		canonicalFilters(req.SessionFilters), canonicalFilters(req.EventFilters), req.Limit})
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// NewCursor starts a cursor of req at the given first-page snapshot.
func NewCursor(req *Request, generation uint64, epoch string) *Cursor {
	return &Cursor{Endpoint: req.Endpoint, Fingerprint: fingerprint(req), Generation: generation, Epoch: epoch}
}

// At returns the encoded cursor continuing at offset.
func (c *Cursor) At(offset int64) string {
	n := *c
	n.Offset = json.Number(strconv.FormatInt(offset, 10))
	return n.encode()
}
