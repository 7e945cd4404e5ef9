package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dshq/dshq"
)

// The endpoints of docs/protocol.md#3-the-trusted-query-api; each is served on
// dshq.QuerySubjectPrefix.<name> (dsh.query.v1.<name>).
const (
	EndpointSessionsList    = "sessions.list"
	EndpointSessionsFilter  = "sessions.filter"
	EndpointSessionsSearch  = "sessions.search"
	EndpointSessionsRead    = "sessions.read"
	EndpointSessionsSurface = "sessions.surface"
	EndpointSessionsTrace   = "sessions.trace"
	EndpointSessionsTitles  = "sessions.titles"
	EndpointSessionsStat    = "sessions.stat"
	EndpointEventsList      = "events.list"
	EndpointEventsFilter    = "events.filter"
	EndpointEventsSearch    = "events.search"
	EndpointEventsRead      = "events.read"
	EndpointEventsTrace     = "events.trace"
)

// Endpoints lists every endpoint in a stable order.
var Endpoints = []string{
	EndpointSessionsList, EndpointSessionsFilter, EndpointSessionsSearch,
	EndpointSessionsRead, EndpointSessionsSurface, EndpointSessionsTrace,
	EndpointSessionsTitles, EndpointSessionsStat, EndpointEventsList, EndpointEventsFilter,
	EndpointEventsSearch, EndpointEventsRead, EndpointEventsTrace,
	EndpointUsageReport,
}

// EndpointSessionsChildren is an endpoint of the projection shards alone,
// never of dsh.query.v1: the children of each of sessionIds, for the
// query service of a partitioned projection, which walks a lineage across
// its shards (docs/protocol.md, "Partitioned projections").
const EndpointSessionsChildren = "sessions.children"

// EndpointCorpusStats is an endpoint of the projection shards alone: the
// shard's BM25 statistics of a phrase (index.CorpusStats), which the query
// service of a partitioned projection sums so that a shard ranks with the
// whole corpus's (docs/protocol.md, "Partitioned projections").
const EndpointCorpusStats = "corpus.stats"

// EndpointSessionsRank is an endpoint of the projection shards alone: the
// shard's session ranking of a sessions.search (SessionRanking), for the
// query service of a partitioned projection, which merges the shards'
// rankings into the corpus's (docs/protocol.md, "Partitioned projections").
const EndpointSessionsRank = "sessions.rank"

// EndpointSessionsHits is an endpoint of the projection shards alone: the
// sessions.search hits of ranked keys the shard holds (SessionHits), and
// the stale check of a later page's sessions, for the query service of a
// partitioned projection.
const EndpointSessionsHits = "sessions.hits"

// CorpusStatsHeader is the header of a search request to a shard that
// carries the corpus's statistics (JSON of dshq.CorpusStats): the shard ranks
// with them.
const CorpusStatsHeader = "Dsh-Corpus-Stats"

// CorpusStatsReply is the corpus.stats reply: a shard's statistics of a
// phrase.
type CorpusStatsReply struct {
	Stats      dshq.CorpusStats `json:"stats"`
	Generation uint64           `json:"generation"`
}

// DecodeCorpusStats decodes the CorpusStatsHeader of a request's headers
// (nil when absent).
func DecodeCorpusStats(h string) (*dshq.CorpusStats, error) {
	if h == "" {
		return nil, nil
	}
	var st dshq.CorpusStats
	if err := json.Unmarshal([]byte(h), &st); err != nil {
		return nil, dshq.Errorf(dshq.CodeInvalidRequest, "header %s is not corpus statistics: %v", CorpusStatsHeader, err)
	}
	return &st, nil
}

// ShardEndpoints lists the endpoints of a projection shard: Endpoints,
// EndpointSessionsChildren and EndpointCorpusStats.
var ShardEndpoints = append(append([]string(nil), Endpoints...), EndpointSessionsChildren, EndpointCorpusStats,
	EndpointSessionsRank, EndpointSessionsHits)

// RankedSession is one session of a SessionRanking: its best event's key
// (as stored for later pages), the score and event time it ranks by, and
// Drop when the shard's snapshot does not count it (an invalid session,
// an event it does not hold yet): a dropped key still takes its place in
// the ranking's window, as on one shard.
type RankedSession struct {
	SessionID string  `json:"s"`
	Seq       int64   `json:"q"`
	Gen       uint64  `json:"g,omitempty"`
	Live      bool    `json:"l,omitempty"`
	Score     float64 `json:"r"`
	Time      int64   `json:"t"`
	Drop      bool    `json:"d,omitempty"`
}

// SessionRanking is the sessions.rank reply: the shard's ranked sessions
// (score desc, time desc, id asc), at most MaxResults of them, More when
// more matched. When the ranking is larger than a reply, Keys is empty
// and Stored names it, in Chunks chunks, in the cursor bucket (whose
// format is the engine's: engine.LoadRanking reads it).
type SessionRanking struct {
	Keys       []RankedSession `json:"keys"`
	Stored     string          `json:"stored,omitempty"`
	Chunks     int             `json:"chunks,omitempty"`
	More       bool            `json:"more,omitempty"`
	MaxResults int             `json:"maxResults"`
	Generation uint64          `json:"generation"`
}

// SessionHits is the sessions.hits reply: the hits of a prefix of the
// request's keys, aligned with them (null where a key no longer
// resolves), as many as fit a reply.
type SessionHits struct {
	Items      []*dshq.SessionSearchHit `json:"items"`
	Generation uint64                   `json:"generation"`
}

// SessionChildren is the sessions.children reply: for each unique id of
// the request, in first-occurrence order, the records of the sessions
// whose parent it is that this shard holds, by createdAt, then id.
type SessionChildren struct {
	Items      []ChildrenOf `json:"items"`
	Generation uint64       `json:"generation"`
}

// ChildrenOf is one item of SessionChildren.
type ChildrenOf struct {
	SessionID string               `json:"sessionId"`
	Children  []dshq.SessionRecord `json:"children"`
}

// maxSeqLiteral is the most of a seq's spelling a message repeats.
const maxSeqLiteral = 64

// maxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER (2^53-1).
const maxSafeInteger = 1<<53 - 1

// Request is a decoded, validated and normalized query request: what the
// Engine runs. Fields an endpoint does not take are zero.
type Request struct {
	Endpoint string
	// MinGeneration is the generation the projection must have applied
	// before answering (0: no wait).
	MinGeneration uint64
	// TimeoutMs bounds the wait for MinGeneration.
	TimeoutMs int

	SessionID  string
	SessionIDs []string
	// Query is the normalized search phrase.
	Query          string
	Filters        []dshq.Filter
	SessionFilters []dshq.Filter
	EventFilters   []dshq.Filter
	// Limit is the effective limit (the default when omitted).
	Limit int
	// Cursor is the cursor as sent ("" = first page); the Engine decodes it.
	Cursor string
	// Seq is the target seq of events.read/trace as sent: a number that may
	// be negative or fractional (then there is no such event).
	Seq float64
	// SeqLit is seq's JSON spelling as sent, for messages: cut to
	// maxSeqLiteral bytes and marked "…" when longer.
	SeqLit string
	Before int
	After  int

	// Keys are the ranked keys of sessions.hits (JSON array of
	// {"s","q","g","l"}), decoded by the engine.
	Keys json.RawMessage
	// Since is the generation of sessions.hits' first page: a session of
	// SessionIDs reclassified after it makes the page stale.
	Since uint64

	// Usage is usage.report's request (usage.go).
	Usage *UsageRequest

	// Body is the request's JSON body as decoded: what a partitioned
	// projection's engine forwards, byte for byte, to the shard that holds
	// a request's session.
	Body []byte

	// CorpusStats, when set, are the corpus's statistics a search ranks
	// with (a partitioned service sends them in CorpusStatsHeader, which
	// the shard decodes into this field): an argument of the request, not
	// part of its JSON body.
	CorpusStats *dshq.CorpusStats
}

// endpointFields lists the fields each endpoint accepts besides
// minGeneration and timeoutMs.
var endpointFields = map[string][]string{
	EndpointSessionsList:     {"limit", "cursor"},
	EndpointSessionsFilter:   {"filters", "limit", "cursor"},
	EndpointSessionsSearch:   {"query", "sessionFilters", "eventFilters", "limit", "cursor"},
	EndpointSessionsRead:     {"sessionId", "limit", "cursor"},
	EndpointSessionsSurface:  {"sessionId", "limit", "cursor"},
	EndpointSessionsTrace:    {"sessionId"},
	EndpointSessionsStat:     {"sessionId"},
	EndpointSessionsTitles:   {"sessionIds"},
	EndpointSessionsChildren: {"sessionIds"},
	EndpointCorpusStats:      {"query"},
	EndpointSessionsRank:     {"query", "sessionFilters", "eventFilters"},
	EndpointSessionsHits:     {"query", "keys", "sessionIds", "since"},
	EndpointEventsList:       {"sessionId", "limit", "cursor"},
	EndpointEventsFilter:     {"sessionId", "filters", "limit", "cursor"},
	EndpointEventsSearch:     {"sessionId", "query", "filters", "limit", "cursor"},
	EndpointEventsRead:       {"sessionId", "seq", "before", "after"},
	EndpointEventsTrace:      {"sessionId", "seq"},
	EndpointUsageReport:      usageFields,
}

// DecodeRequest decodes body as a request of endpoint, strictly, and
// validates and normalizes it in the original's order
// (docs/search.md#request-validation-order, docs/query.md#event-read-windows).
// The first failure wins. It returns a *dshq.Error with code
// SESSION_QUERY_INVALID_REQUEST (body shape, unknown field, sessionId,
// seq type, minGeneration, timeoutMs), INVALID_FILTER, INVALID_CURSOR,
// INVALID_QUERY, INVALID_LIMIT or INVALID_WINDOW.
func DecodeRequest(endpoint string, body []byte) (*Request, error) {
	allowed, ok := endpointFields[endpoint]
	if !ok {
		return nil, dshq.Errorf(dshq.CodeInvalidRequest, "unknown endpoint %s", dshq.Quote(endpoint))
	}
	fields, err := DecodeObject(body)
	if err != nil {
		return nil, err
	}
	if err := checkKnownFields(fields, allowed); err != nil {
		return nil, err
	}
	req := &Request{Endpoint: endpoint, TimeoutMs: dshq.DefaultTimeoutMs, Body: body}
	if err := req.decodeConsistency(fields); err != nil {
		return nil, err
	}
	if err := req.decodeFields(fields); err != nil {
		return nil, err
	}
	return req, nil
}

func (r *Request) decodeFields(f map[string]json.RawMessage) error {
	var steps []func() error
	sessionID := func(code dshq.Code) func() error {
		return func() (err error) { r.SessionID, err = decodeSessionID(f, code); return err }
	}
	filters := func(name string, dst *[]dshq.Filter, s filterScope) func() error {
		return func() (err error) { *dst, err = decodeFilters(f[name], name, s); return err }
	}
	cursor := func() (err error) { r.Cursor, err = decodeCursorField(f); return err }
	query := func() (err error) { r.Query, err = decodeQuery(f); return err }
	limit := func(def, max int) func() error {
		return func() (err error) { r.Limit, err = decodeLimit(f, def, max); return err }
	}
	listLimit := limit(dshq.DefaultListLimit, dshq.MaxListLimit)
	searchLimit := limit(dshq.DefaultSearchLimit, dshq.MaxSearchLimit)
	switch r.Endpoint {
	case EndpointSessionsList:
		steps = []func() error{cursor, listLimit}
	case EndpointSessionsFilter:
		steps = []func() error{filters("filters", &r.Filters, scopeSession), cursor, listLimit}
	case EndpointSessionsSearch:
		steps = []func() error{
			filters("sessionFilters", &r.SessionFilters, scopeSessionSearch),
			filters("eventFilters", &r.EventFilters, scopeEventSearch),
			cursor, query, searchLimit,
		}
	case EndpointSessionsRead, EndpointSessionsSurface, EndpointEventsList:
		steps = []func() error{sessionID(dshq.CodeInvalidRequest), cursor, listLimit}
	case EndpointSessionsTrace, EndpointSessionsStat:
		steps = []func() error{sessionID(dshq.CodeInvalidRequest)}
	case EndpointCorpusStats:
		steps = []func() error{query}
	case EndpointSessionsRank:
		steps = []func() error{
			filters("sessionFilters", &r.SessionFilters, scopeSessionSearch),
			filters("eventFilters", &r.EventFilters, scopeEventSearch),
			query,
		}
	case EndpointSessionsHits:
		steps = []func() error{query,
			func() (err error) { r.SessionIDs, err = decodeSessionIDs(f); return err },
			func() error {
				if raw := f["keys"]; jsonKind(raw) == kindArray {
					r.Keys = raw
					return nil
				}
				return dshq.Errorf(dshq.CodeInvalidRequest, "keys must be an array")
			},
			func() error {
				if raw, ok := f["since"]; ok && json.Unmarshal(raw, &r.Since) != nil {
					return dshq.Errorf(dshq.CodeInvalidRequest, "since must be a generation")
				}
				return nil
			},
		}
	case EndpointSessionsTitles, EndpointSessionsChildren:
		steps = []func() error{func() (err error) { r.SessionIDs, err = decodeSessionIDs(f); return err }}
	case EndpointEventsFilter:
		steps = []func() error{sessionID(dshq.CodeInvalidRequest), filters("filters", &r.Filters, scopeEvent), cursor, listLimit}
	case EndpointEventsSearch:
		steps = []func() error{sessionID(dshq.CodeInvalidFilter), filters("filters", &r.Filters, scopeEventSearch), cursor, query, searchLimit}
	case EndpointEventsRead:
		steps = []func() error{
			sessionID(dshq.CodeInvalidRequest),
			func() (err error) { r.Before, err = decodeWindow(f, "before"); return err },
			func() (err error) { r.After, err = decodeWindow(f, "after"); return err },
			r.seqStep(f),
		}
	case EndpointEventsTrace:
		steps = []func() error{sessionID(dshq.CodeInvalidRequest), r.seqStep(f)}
	case EndpointUsageReport:
		steps = []func() error{func() error { return decodeUsageRequest(f, r) }}
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

func (r *Request) seqStep(f map[string]json.RawMessage) func() error {
	return func() error {
		raw, ok := f["seq"]
		if !ok {
			return dshq.Errorf(dshq.CodeInvalidRequest, "seq is required")
		}
		if jsonKind(raw) != kindNumber {
			return dshq.Errorf(dshq.CodeInvalidRequest, "seq must be a number, got %s", jsonKind(raw))
		}
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil && !math.IsInf(v, 0) {
			return dshq.Errorf(dshq.CodeInvalidRequest, "seq must be a number")
		}
		r.Seq, r.SeqLit = v, string(raw)
		if len(r.SeqLit) > maxSeqLiteral { // only ASCII: digits, signs, '.', 'e'
			r.SeqLit = r.SeqLit[:maxSeqLiteral] + "…"
		}
		return nil
	}
}

// decodeConsistency reads minGeneration and timeoutMs.
func (r *Request) decodeConsistency(f map[string]json.RawMessage) error {
	if raw, ok := f["minGeneration"]; ok {
		v, ok := safeInteger(raw)
		if !ok || v < 0 {
			return dshq.Errorf(dshq.CodeInvalidRequest, "minGeneration must be an integer between 0 and %d", int64(maxSafeInteger))
		}
		r.MinGeneration = uint64(v)
	}
	if raw, ok := f["timeoutMs"]; ok {
		v, ok := safeInteger(raw)
		if !ok || v < 1 || v > dshq.MaxTimeoutMs {
			return dshq.Errorf(dshq.CodeInvalidRequest, "timeoutMs must be an integer between 1 and %d", dshq.MaxTimeoutMs)
		}
		r.TimeoutMs = int(v)
	}
	return nil
}

// DecodeObject parses body as one JSON object with unique keys.
func DecodeObject(body []byte) (map[string]json.RawMessage, error) {
	if len(body) > dshq.MaxRequestBytes {
		return nil, dshq.Errorf(dshq.CodeInvalidRequest, "request body is %d bytes; at most %d are allowed", len(body), dshq.MaxRequestBytes)
	}
	if !utf8.Valid(body) {
		return nil, dshq.Errorf(dshq.CodeInvalidRequest, "request body is not valid UTF-8")
	}
	notObject := dshq.Errorf(dshq.CodeInvalidRequest, "request body must be a JSON object")
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, notObject
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, notObject
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, dshq.Errorf(dshq.CodeInvalidRequest, "request body is not valid JSON: %v", err)
		}
		if _, dup := fields[key]; dup {
			return nil, dshq.Errorf(dshq.CodeInvalidRequest, "request field %s appears more than once", dshq.Quote(key))
		}
		fields[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, notObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, dshq.Errorf(dshq.CodeInvalidRequest, "request body has data after the JSON object")
	}
	return fields, nil
}

func checkKnownFields(fields map[string]json.RawMessage, allowed []string) error {
	known := map[string]bool{"minGeneration": true, "timeoutMs": true}
	for _, k := range allowed {
		known[k] = true
	}
	var unknown []string
	for k := range fields {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return dshq.Errorf(dshq.CodeInvalidRequest, "unknown request field %s (allowed: %s, minGeneration, timeoutMs)", dshq.Quote(unknown[0]), strings.Join(allowed, ", "))
}

func decodeSessionID(f map[string]json.RawMessage, code dshq.Code) (string, error) {
	raw, ok := f["sessionId"]
	if !ok {
		return "", dshq.Errorf(code, "sessionId is required")
	}
	return sessionIDText(raw, "sessionId", code)
}

// sessionIDText decodes raw, the JSON value of the request field name, as
// a session id: a string that is a valid id (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys), else a
// failure of code. An id that is not valid names no session, so it is
// refused here rather than looked up.
func sessionIDText(raw json.RawMessage, name string, code dshq.Code) (string, error) {
	var s string
	if jsonKind(raw) != kindString || json.Unmarshal(raw, &s) != nil {
		return "", dshq.Errorf(code, "%s must be a string, got %s", name, jsonKind(raw))
	}
	if loneSurrogate(raw) {
		// encoding/json decodes it to U+FFFD, which would name another id.
		return "", dshq.Errorf(code, "%s is not a valid session id: it escapes a lone UTF-16 surrogate", name)
	}
	if problem := dshq.SessionIDProblem(s); problem != "" {
		return "", dshq.Errorf(code, "%s is not a valid session id: %s", name, problem)
	}
	return s, nil
}

// loneSurrogate reports whether raw, a JSON string, holds a \u escape of a
// UTF-16 surrogate that is not half of a high-low pair.
func loneSurrogate(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw[i+1:])
		if !ok {
			return false // not valid JSON; the decoder refused it already
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true // a low half with no high half before it
		case r >= 0xD800 && r <= 0xDBFF:
			if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return true
			}
			low, ok := hex4(raw[i+3:])
			if !ok || low < 0xDC00 || low > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

// hex4 parses the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(v), err == nil
}

func decodeSessionIDs(f map[string]json.RawMessage) ([]string, error) {
	raw, ok := f["sessionIds"]
	if !ok {
		return nil, dshq.Errorf(dshq.CodeInvalidRequest, "sessionIds is required")
	}
	var items []json.RawMessage
	if jsonKind(raw) != kindArray || json.Unmarshal(raw, &items) != nil {
		return nil, dshq.Errorf(dshq.CodeInvalidRequest, "sessionIds must be an array of strings, got %s", jsonKind(raw))
	}
	ids := make([]string, len(items))
	for i, it := range items {
		var err error
		if ids[i], err = sessionIDText(it, fmt.Sprintf("sessionIds[%d]", i), dshq.CodeInvalidRequest); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func decodeCursorField(f map[string]json.RawMessage) (string, error) {
	raw, ok := f["cursor"]
	if !ok {
		return "", nil
	}
	var s string
	if jsonKind(raw) != kindString || json.Unmarshal(raw, &s) != nil {
		return "", dshq.Errorf(dshq.CodeInvalidCursor, "cursor must be text, got %s", jsonKind(raw))
	}
	if s == "" {
		return "", dshq.Errorf(dshq.CodeInvalidCursor, "cursor must not be empty")
	}
	return s, nil
}

func decodeLimit(f map[string]json.RawMessage, def, max int) (int, error) {
	raw, ok := f["limit"]
	if !ok {
		return def, nil
	}
	v, ok := safeInteger(raw)
	if !ok || v < 1 || v > int64(max) {
		return 0, dshq.Errorf(dshq.CodeInvalidLimit, "limit must be an integer between 1 and %d", max)
	}
	return int(v), nil
}

func decodeWindow(f map[string]json.RawMessage, name string) (int, error) {
	raw, ok := f[name]
	if !ok {
		return 0, nil
	}
	v, ok := safeInteger(raw)
	if !ok || v < 0 || v > dshq.ReadWindowMax {
		return 0, dshq.Errorf(dshq.CodeInvalidWindow, "%s must be an integer between 0 and %d", name, dshq.ReadWindowMax)
	}
	return int(v), nil
}

// decodeQuery normalizes the search phrase, which is data, never syntax
// (docs/search.md#the-query-is-a-literal-phrase).
func decodeQuery(f map[string]json.RawMessage) (string, error) {
	raw, ok := f["query"]
	var s string
	if !ok || jsonKind(raw) != kindString || json.Unmarshal(raw, &s) != nil {
		got := "nothing"
		if ok {
			got = jsonKind(raw).String()
		}
		return "", dshq.Errorf(dshq.CodeInvalidQuery, "query must be text, got %s", got)
	}
	q := strings.Join(splitJSSpace(s), " ")
	if q == "" {
		return "", dshq.Errorf(dshq.CodeInvalidQuery, "query must not be blank")
	}
	if strings.ContainsRune(q, 0) {
		return "", dshq.Errorf(dshq.CodeInvalidQuery, "query must not contain NUL")
	}
	return strings.NewReplacer("\uFDD0", "\uFFFD", "\uFDD1", "\uFFFD").Replace(q), nil
}

// isJSSpace reports whether r is in JavaScript's \s class.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// splitJSSpace splits s on runs of JavaScript whitespace, dropping empty
// parts (trim + split(/\s+/)).
func splitJSSpace(s string) []string { return strings.FieldsFunc(s, isJSSpace) }

type jsonType int

const (
	kindInvalid jsonType = iota
	kindNull
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k jsonType) String() string {
	return [...]string{"invalid JSON", "null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// jsonKind classifies a raw JSON value by its first byte.
func jsonKind(raw json.RawMessage) jsonType {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return kindInvalid
	}
	switch raw[0] {
	case 'n':
		return kindNull
	case 't', 'f':
		return kindBool
	case '"':
		return kindString
	case '[':
		return kindArray
	case '{':
		return kindObject
	}
	return kindNumber
}

// number parses a raw JSON number; ok is false for other types and for
// magnitudes beyond float64.
func number(raw json.RawMessage) (float64, bool) {
	if jsonKind(raw) != kindNumber {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	return v, err == nil
}

// safeInteger parses a raw JSON number that is a safe integer
// (Number.isSafeInteger: 1.0 and 1e2 count, 0.5 does not).
func safeInteger(raw json.RawMessage) (int64, bool) {
	v, ok := number(raw)
	if !ok || v != math.Trunc(v) || math.Abs(v) > maxSafeInteger {
		return 0, false
	}
	return int64(v), true
}

func quoteList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}
