package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/dshq/dshq"
)

// cursorVersion is the version of the cursor encoding: 2 is authenticated
// (version 1 cursors, unsigned, are no longer accepted).
const cursorVersion = 2

// Cursor bounds and formats.
const (
	// CursorKeyBytes is the length of a cursor key.
	CursorKeyBytes = 32
	// MaxCursorBytes bounds a cursor's text; the service issues far
	// shorter ones (a page keeps 2 KiB for its nextCursor).
	MaxCursorBytes = 2 << 10
	// macBytes is the length of the cursor's MAC: HMAC-SHA256 cut to 128
	// bits.
	macBytes = 16
	// macContext separates the cursor's MAC from any other use of the key.
	macContext = "dshq cursor v2\x00"
	// maxOrderKey is the longest order key of a session: 8 bytes of
	// createdAt and its id.
	maxOrderKey = 8 + dshq.MaxSessionIDBytes
	// maxLineage bounds a projection lineage.
	maxLineage = 64
)

// CursorKey is the HMAC-SHA256 key that authenticates a deployment's
// cursors: a cursor is answered only by a service holding the key that
// issued it (docs/protocol.md#3-the-trusted-query-api, paging and cursors).
type CursorKey []byte

// NewCursorKey returns a fresh random key (for one process, or to store
// as the deployment's key).
func NewCursorKey() CursorKey {
	k := make(CursorKey, CursorKeyBytes)
	if _, err := rand.Read(k); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return k
}

// ErrCursorKey is wrapped by the failure of a key of the wrong length.
var ErrCursorKey = errors.New("cursor key must be 32 bytes")

// Check reports whether k is usable.
func (k CursorKey) Check() error {
	if len(k) != CursorKeyBytes {
		return ErrCursorKey
	}
	return nil
}

// mac returns the cursor MAC of payload.
func (k CursorKey) mac(payload []byte) []byte {
	h := hmac.New(sha256.New, k)
	h.Write([]byte(macContext))
	h.Write(payload)
	return h.Sum(nil)[:macBytes]
}

// Cursor is the state a nextCursor carries: base64url of its JSON and a
// MAC of it under the deployment's CursorKey. It binds the canonical
// request (Fingerprint), the generation and projection epoch of the first
// page, and the position to continue from. The engine fills and reads it;
// its text is opaque to clients.
type Cursor struct {
	Version     int    `json:"v"`
	Endpoint    string `json:"e"`
	Fingerprint string `json:"f"`
	// Generation and Lineage are those of the first page.
	Generation uint64 `json:"g"`
	Lineage    string `json:"p"`
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
	// key signs the cursor's encodings.
	key CursorKey
}

// encode returns the opaque cursor text: base64url(JSON) "." base64url(MAC).
func (c *Cursor) encode() string {
	c.Version = cursorVersion
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(c.key.mac(b))
}

// DecodeCursor decodes req.Cursor as a cursor of req issued under key. A
// cursor the service did not issue — too long, malformed, not
// authenticated by key (forged, altered, of another deployment), of
// another endpoint or another request (by fingerprint), or holding a field
// out of range — is SESSION_QUERY_INVALID_CURSOR.
func DecodeCursor(key CursorKey, req *Request) (*Cursor, error) {
	invalid := func(why string) error {
		return dshq.Errorf(dshq.CodeInvalidCursor, "cursor is invalid: %s", why)
	}
	if len(req.Cursor) > MaxCursorBytes {
		return nil, invalid("it is longer than any cursor this service issues")
	}
	text, sig, ok := strings.Cut(req.Cursor, ".")
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		return nil, invalid("not base64url")
	}
	mac, err := base64.RawURLEncoding.DecodeString(sig)
	if !ok || err != nil || key.Check() != nil || !hmac.Equal(mac, key.mac(raw)) {
		return nil, invalid("it was not issued by this service")
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
	if why := c.check(); why != "" {
		return nil, invalid(why)
	}
	c.key = key
	return &c, nil
}

// check validates the fields of an authenticated cursor of its endpoint and
// sets Position; it returns what is wrong, or "".
func (c *Cursor) check() string {
	off, ok := safeInteger(json.RawMessage(c.Offset))
	switch {
	case !ok || off < 0 || c.Bound < 0 || c.Bound > maxSafeInteger || (c.Bound > 0 && off > c.Bound):
		return "offset out of range"
	case c.Generation > maxSafeInteger:
		return "generation out of range"
	case len(c.Lineage) > maxLineage:
		return "epoch out of range"
	case c.Captured < -1 || (c.Captured != 0 && c.Endpoint != EndpointSessionsSurface):
		return "captured seq out of range"
	}
	list := c.Endpoint == EndpointSessionsList || c.Endpoint == EndpointSessionsFilter
	if len(c.Key) > maxOrderKey || (len(c.Key) > 0 && !list) {
		return "order key out of range"
	}
	search := c.Endpoint == EndpointSessionsSearch || c.Endpoint == EndpointEventsSearch
	if (c.Store != "" && !search) || !storeName(c.Store) {
		return "stored results out of range"
	}
	c.Position = off
	return ""
}

// storeName reports whether s can name stored search hits: "" (none), or
// the 24 lowercase hex digits (96 random bits) the engine names them with.
func storeName(s string) bool {
	if s == "" {
		return true
	}
	if len(s) != 24 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
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
		// A list's order and summary (additions): absent for the
		// original's request, whose fingerprint is unchanged.
		Order   string `json:"o,omitempty"`
		Summary bool   `json:"m,omitempty"`
	}{req.Endpoint, req.SessionID, req.Query, canonicalFilters(req.Filters),
		canonicalFilters(req.SessionFilters), canonicalFilters(req.EventFilters), req.Limit, listOrderPrint(req.Order), req.Summary})
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// listOrderPrint is a list order as a fingerprint holds it: "" for the
// default.
func listOrderPrint(o dshq.ListOrder) string {
	if o == dshq.OrderCreatedDesc {
		return ""
	}
	return string(o)
}

// NewCursor starts a cursor of req at the given first-page snapshot, to be
// issued under key.
func NewCursor(key CursorKey, req *Request, generation uint64, lineage string) *Cursor {
	return &Cursor{Endpoint: req.Endpoint, Fingerprint: fingerprint(req), Generation: generation, Lineage: lineage, key: key}
}

// At returns the encoded cursor continuing at offset.
func (c *Cursor) At(offset int64) string {
	n := *c
	n.Offset = json.Number(strconv.FormatInt(offset, 10))
	return n.encode()
}
