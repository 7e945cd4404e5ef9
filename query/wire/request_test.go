package wire

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dshq/dshq"
)

func TestDecodeRequest(t *testing.T) {
	big := `{"query":"` + strings.Repeat("a", dshq.MaxRequestBytes) + `"}`
	tests := []struct {
		name     string
		endpoint string
		body     string
		code     dshq.Code
		message  string
	}{
		{"a body that is an array is refused", EndpointSessionsList, `[]`, dshq.CodeInvalidRequest, "request body must be a JSON object"},
		{"a body that is not JSON is refused", EndpointSessionsList, `{"limit":`, dshq.CodeInvalidRequest, "request body is not valid JSON"},
		{"an empty body is refused", EndpointSessionsList, ``, dshq.CodeInvalidRequest, "request body must be a JSON object"},
		{"trailing data after the object is refused", EndpointSessionsList, `{} {}`, dshq.CodeInvalidRequest, "request body has data after the JSON object"},
		{"a body over 1 MiB is refused", EndpointSessionsSearch, big, dshq.CodeInvalidRequest, "request body is 1048588 bytes; at most 1048576 are allowed"},
		{"invalid UTF-8 is refused", EndpointSessionsList, "{\"cursor\":\"\xff\"}", dshq.CodeInvalidRequest, "request body is not valid UTF-8"},
		{"a duplicated field is refused", EndpointSessionsList, `{"limit":1,"limit":2}`, dshq.CodeInvalidRequest, `request field "limit" appears more than once`},
		{"an unknown field is refused", EndpointSessionsList, `{"limt":1}`, dshq.CodeInvalidRequest, `unknown request field "limt" (allowed: limit, cursor, order, summary, minGeneration, timeoutMs)`},
		{"an unknown list order is refused", EndpointSessionsList, `{"order":"title"}`, dshq.CodeInvalidRequest, `order must be one of "created-desc", "created-asc", "activity-desc", "activity-asc"`},
		{"a non-string list order is refused", EndpointSessionsFilter, `{"filters":[],"order":1}`, dshq.CodeInvalidRequest, `order must be one of`},
		{"a non-boolean summary is refused", EndpointSessionsList, `{"summary":"yes"}`, dshq.CodeInvalidRequest, "summary must be a boolean"},
		{"sessions.search takes no list order", EndpointSessionsSearch, `{"query":"a","order":"activity-desc"}`, dshq.CodeInvalidRequest, `unknown request field "order"`},
		{"a machine filter is sessions.filter's alone", EndpointSessionsSearch, `{"query":"a","sessionFilters":[{"kind":"machine","values":["m"]}]}`, dshq.CodeInvalidFilter, `sessionFilters[0].kind must be one of "id", "cwd", "created-at", "parent", "availability", "tenant", "harness", got "machine"`},
		{"a cwd-prefix value must be a string", EndpointSessionsFilter, `{"filters":[{"kind":"cwd-prefix","values":[null]}]}`, dshq.CodeInvalidFilter, "filters[0].values must be an array of strings; values[0] is null"},
		{"minGeneration must be an integer", EndpointSessionsList, `{"minGeneration":"1"}`, dshq.CodeInvalidRequest, "minGeneration must be an integer between 0 and 9007199254740991"},
		{"minGeneration must not be negative", EndpointSessionsList, `{"minGeneration":-1}`, dshq.CodeInvalidRequest, "minGeneration must be an integer between 0 and 9007199254740991"},
		{"timeoutMs must be at least 1", EndpointSessionsList, `{"timeoutMs":0}`, dshq.CodeInvalidRequest, "timeoutMs must be an integer between 1 and 30000"},
		{"timeoutMs must be at most 30000", EndpointSessionsList, `{"timeoutMs":30001}`, dshq.CodeInvalidRequest, "timeoutMs must be an integer between 1 and 30000"},
		{"timeoutMs must not be fractional", EndpointSessionsList, `{"timeoutMs":1.5}`, dshq.CodeInvalidRequest, "timeoutMs must be an integer between 1 and 30000"},
		{"a limit of 0 is refused", EndpointSessionsList, `{"limit":0}`, dshq.CodeInvalidLimit, "limit must be an integer between 1 and 10000"},
		{"a list limit over 10000 is refused", EndpointSessionsList, `{"limit":10001}`, dshq.CodeInvalidLimit, "limit must be an integer between 1 and 10000"},
		{"a search limit over 100 is refused", EndpointSessionsSearch, `{"query":"a","limit":101}`, dshq.CodeInvalidLimit, "limit must be an integer between 1 and 100"},
		{"a string limit is INVALID_LIMIT", EndpointSessionsList, `{"limit":"5"}`, dshq.CodeInvalidLimit, "limit must be an integer between 1 and 10000"},
		{"a null limit is INVALID_LIMIT", EndpointSessionsList, `{"limit":null}`, dshq.CodeInvalidLimit, "limit must be an integer between 1 and 10000"},
		{"a fractional limit is INVALID_LIMIT", EndpointEventsList, `{"sessionId":"s","limit":2.5}`, dshq.CodeInvalidLimit, "limit must be an integer between 1 and 10000"},
		{"a non-text cursor is INVALID_CURSOR", EndpointSessionsList, `{"cursor":5}`, dshq.CodeInvalidCursor, "cursor must be text, got a number"},
		{"an empty cursor is INVALID_CURSOR", EndpointSessionsList, `{"cursor":""}`, dshq.CodeInvalidCursor, "cursor must not be empty"},
		{"the cursor is checked before the limit", EndpointSessionsList, `{"cursor":1,"limit":0}`, dshq.CodeInvalidCursor, "cursor must be text"},
		{"a non-text query is INVALID_QUERY", EndpointSessionsSearch, `{"query":1}`, dshq.CodeInvalidQuery, "query must be text, got a number"},
		{"a missing query is INVALID_QUERY", EndpointSessionsSearch, `{}`, dshq.CodeInvalidQuery, "query must be text, got nothing"},
		{"a blank query is INVALID_QUERY", EndpointSessionsSearch, `{"query":" \n\t\u3000"}`, dshq.CodeInvalidQuery, "query must not be blank"},
		{"a query with NUL is INVALID_QUERY", EndpointSessionsSearch, `{"query":"a\u0000b"}`, dshq.CodeInvalidQuery, "query must not contain NUL"},
		{"session filters are checked before event filters", EndpointSessionsSearch, `{"sessionFilters":1,"eventFilters":1,"query":1}`, dshq.CodeInvalidFilter, "sessionFilters must be an array, got a number"},
		{"event filters are checked before the cursor", EndpointSessionsSearch, `{"eventFilters":{},"cursor":1}`, dshq.CodeInvalidFilter, "eventFilters must be an array, got an object"},
		{"the cursor is checked before the query", EndpointSessionsSearch, `{"cursor":1,"query":""}`, dshq.CodeInvalidCursor, "cursor must be text"},
		{"the query is checked before the limit", EndpointSessionsSearch, `{"query":"","limit":0}`, dshq.CodeInvalidQuery, "query must not be blank"},
		{"a text clause in search filters is refused", EndpointSessionsSearch, `{"query":"a","eventFilters":[{"kind":"text","text":"x"}]}`, dshq.CodeInvalidFilter, "metadata filters do not accept text clauses (eventFilters[0])"},
		{"a text clause in events.search is refused", EndpointEventsSearch, `{"sessionId":"s","query":"a","filters":[{"kind":"text","text":"x"}]}`, dshq.CodeInvalidFilter, "metadata filters do not accept text clauses (filters[0])"},
		{"a non-string sessionId of events.search is INVALID_FILTER", EndpointEventsSearch, `{"sessionId":7,"query":"a"}`, dshq.CodeInvalidFilter, "sessionId must be a string, got a number"},
		{"the sessionId of events.search is checked before its filters", EndpointEventsSearch, `{"sessionId":null,"filters":1}`, dshq.CodeInvalidFilter, "sessionId must be a string, got null"},
		{"a non-string sessionId elsewhere is INVALID_REQUEST", EndpointEventsList, `{"sessionId":["s"]}`, dshq.CodeInvalidRequest, "sessionId must be a string, got an array"},
		{"a missing sessionId is INVALID_REQUEST", EndpointSessionsTrace, `{}`, dshq.CodeInvalidRequest, "sessionId is required"},
		{"an unknown filter kind is refused", EndpointSessionsFilter, `{"filters":[{"kind":"color","values":[]}]}`, dshq.CodeInvalidFilter, `filters[0].kind must be one of "id", "cwd", "created-at", "parent", "availability", "tenant", "harness", "machine", "cwd-prefix", got "color"`},
		{"a missing filter kind is refused", EndpointSessionsFilter, `{"filters":[{"values":[]}]}`, dshq.CodeInvalidFilter, "filters[0].kind must be a string"},
		{"an event kind in session filters is refused", EndpointSessionsFilter, `{"filters":[{"kind":"seq"}]}`, dshq.CodeInvalidFilter, `filters[0].kind must be one of`},
		{"missing filters are refused", EndpointSessionsFilter, `{}`, dshq.CodeInvalidFilter, "filters must be an array, got nothing"},
		{"a filter that is not an object is refused", EndpointEventsFilter, `{"sessionId":"s","filters":["seq"]}`, dshq.CodeInvalidFilter, "filters[0] must be an object, got a string"},
		{"an availability outside the closed set is refused", EndpointSessionsFilter, `{"filters":[{"kind":"availability","values":["remote"]}]}`, dshq.CodeInvalidFilter, `filters[0].values[0] must be one of "live", "persisted", got "remote"`},
		{"a surface outside the closed set is refused", EndpointEventsFilter, `{"sessionId":"s","filters":[{"kind":"surface","values":["future"]}]}`, dshq.CodeInvalidFilter, `filters[0].values[0] must be one of "current", "shadowed", "log-only", got "future"`},
		{"null in an id list is refused", EndpointSessionsFilter, `{"filters":[{"kind":"id","values":[null]}]}`, dshq.CodeInvalidFilter, "filters[0].values must be an array of strings; values[0] is null"},
		{"a number in a cwd list is refused", EndpointSessionsFilter, `{"filters":[{"kind":"cwd","values":[null,1]}]}`, dshq.CodeInvalidFilter, "filters[0].values must be an array of strings or nulls; values[1] is a number"},
		{"a range bound that is not a number is refused", EndpointEventsFilter, `{"sessionId":"s","filters":[{"kind":"seq","from":"1"}]}`, dshq.CodeInvalidFilter, "filters[0].from must be a finite number"},
		{"a huge range bound is not finite", EndpointEventsFilter, `{"sessionId":"s","filters":[{"kind":"time","to":1e400}]}`, dshq.CodeInvalidFilter, "filters[0].to must be a finite number"},
		{"from greater than to is refused", EndpointSessionsFilter, `{"filters":[{"kind":"created-at","from":3,"to":2}]}`, dshq.CodeInvalidFilter, "filters[0].from must not be greater than filters[0].to"},
		{"a blank text clause is refused", EndpointEventsFilter, `{"sessionId":"s","filters":[{"kind":"text","text":"  "}]}`, dshq.CodeInvalidFilter, "filters[0].text must not be blank"},
		{"a non-string text is refused", EndpointEventsFilter, `{"sessionId":"s","filters":[{"kind":"text","text":3}]}`, dshq.CodeInvalidFilter, "filters[0].text must be a string"},
		{"an unknown key in a clause is refused", EndpointEventsFilter, `{"sessionId":"s","filters":[{"kind":"type","values":[],"from":1}]}`, dshq.CodeInvalidFilter, `filters[0] has unknown field "from" for kind "type"`},
		{"before below 0 is INVALID_WINDOW", EndpointEventsRead, `{"sessionId":"s","seq":0,"before":-1}`, dshq.CodeInvalidWindow, "before must be an integer between 0 and 50"},
		{"before above 50 is INVALID_WINDOW", EndpointEventsRead, `{"sessionId":"s","seq":0,"before":51}`, dshq.CodeInvalidWindow, "before must be an integer between 0 and 50"},
		{"a fractional after is INVALID_WINDOW", EndpointEventsRead, `{"sessionId":"s","seq":0,"after":0.5}`, dshq.CodeInvalidWindow, "after must be an integer between 0 and 50"},
		{"a string before is INVALID_WINDOW", EndpointEventsRead, `{"sessionId":"s","seq":0,"before":"1"}`, dshq.CodeInvalidWindow, "before must be an integer between 0 and 50"},
		{"the window is checked before the seq", EndpointEventsRead, `{"sessionId":"s","seq":"x","after":99}`, dshq.CodeInvalidWindow, "after must be an integer between 0 and 50"},
		{"a seq that is not a number is INVALID_REQUEST", EndpointEventsRead, `{"sessionId":"s","seq":"1"}`, dshq.CodeInvalidRequest, "seq must be a number, got a string"},
		{"a missing seq is INVALID_REQUEST", EndpointEventsTrace, `{"sessionId":"s"}`, dshq.CodeInvalidRequest, "seq is required"},
		{"sessionIds must be an array", EndpointSessionsTitles, `{"sessionIds":"a"}`, dshq.CodeInvalidRequest, "sessionIds must be an array of strings, got a string"},
		{"sessionIds must hold strings", EndpointSessionsTitles, `{"sessionIds":["a",1]}`, dshq.CodeInvalidRequest, "sessionIds[1] must be a string, got a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest(tt.endpoint, []byte(tt.body))
			if err == nil {
				t.Fatalf("DecodeRequest(%s, %.60q) succeeded; want %s", tt.endpoint, tt.body, tt.code)
			}
			if got := dshq.ErrorCode(err); got != tt.code {
				t.Fatalf("code = %s (%v); want %s", got, err, tt.code)
			}
			if !strings.HasPrefix(err.Error(), tt.message) {
				t.Fatalf("message = %q; want it to start with %q", err.Error(), tt.message)
			}
		})
	}
}

func TestDecodeRequestNormalizes(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		body     string
		check    func(*Request) bool
	}{
		{"an omitted search limit is 20", EndpointSessionsSearch, `{"query":"a"}`, func(r *Request) bool { return r.Limit == 20 }},
		{"an omitted list limit is 1000", EndpointSessionsList, `{}`, func(r *Request) bool { return r.Limit == 1000 }},
		{"a limit written 1e2 is 100", EndpointSessionsSearch, `{"query":"a","limit":1e2}`, func(r *Request) bool { return r.Limit == 100 }},
		{"the query is trimmed and its whitespace collapsed", EndpointSessionsSearch, "{\"query\":\"  alpha \\n\\t beta\\u3000 \"}", func(r *Request) bool { return r.Query == "alpha beta" }},
		{"the omitted timeout is 5000 ms", EndpointEventsTrace, `{"sessionId":"s","seq":1}`, func(r *Request) bool { return r.TimeoutMs == 5000 }},
		{"minGeneration is read", EndpointEventsTrace, `{"sessionId":"s","seq":1,"minGeneration":42}`, func(r *Request) bool { return r.MinGeneration == 42 }},
		{"a negative seq decodes (it is not found later)", EndpointEventsRead, `{"sessionId":"s","seq":-1}`, func(r *Request) bool { return r.Seq == -1 && r.SeqLit == "-1" }},
		{"an empty value list is legal", EndpointSessionsFilter, `{"filters":[{"kind":"id","values":[]}]}`, func(r *Request) bool { return len(r.Filters) == 1 && len(r.Filters[0].Values) == 0 }},
		{"cwd and parent lists accept null", EndpointSessionsFilter, `{"filters":[{"kind":"cwd","values":[null,"/a"]},{"kind":"parent","values":[null]}]}`, func(r *Request) bool { return r.Filters[0].Values[0] == nil && *r.Filters[0].Values[1] == "/a" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := DecodeRequest(tt.endpoint, []byte(tt.body))
			if err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			if !tt.check(r) {
				t.Fatalf("normalized request %+v does not hold", r)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	fp := func(endpoint, body string) string {
		t.Helper()
		r, err := DecodeRequest(endpoint, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return fingerprint(r)
	}
	base := fp(EndpointSessionsSearch, `{"query":"a b","sessionFilters":[{"kind":"id","values":["x","y"]},{"kind":"cwd","values":["/p",null]}]}`)
	same := []struct{ name, body string }{
		{"reordered clauses and values give the same fingerprint", `{"query":"a b","sessionFilters":[{"kind":"cwd","values":[null,"/p"]},{"kind":"id","values":["y","x"]}]}`},
		{"the default limit written out gives the same fingerprint", `{"query":"a b","limit":20,"sessionFilters":[{"kind":"id","values":["x","y"]},{"kind":"cwd","values":["/p",null]}]}`},
		{"whitespace around the query gives the same fingerprint", `{"query":" a   b ","sessionFilters":[{"kind":"id","values":["x","y"]},{"kind":"cwd","values":["/p",null]}]}`},
	}
	for _, tt := range same {
		t.Run(tt.name, func(t *testing.T) {
			if got := fp(EndpointSessionsSearch, tt.body); got != base {
				t.Fatalf("fingerprint differs")
			}
		})
	}
	differ := []struct{ name, body string }{
		{"another query gives another fingerprint", `{"query":"a c","sessionFilters":[{"kind":"id","values":["x","y"]},{"kind":"cwd","values":["/p",null]}]}`},
		{"another limit gives another fingerprint", `{"query":"a b","limit":21,"sessionFilters":[{"kind":"id","values":["x","y"]},{"kind":"cwd","values":["/p",null]}]}`},
		{"a dropped value gives another fingerprint", `{"query":"a b","sessionFilters":[{"kind":"id","values":["x"]},{"kind":"cwd","values":["/p",null]}]}`},
		{"filters moved to the event side give another fingerprint", `{"query":"a b","sessionFilters":[{"kind":"cwd","values":["/p",null]}],"eventFilters":[{"kind":"type","values":["x","y"]}]}`},
	}
	for _, tt := range differ {
		t.Run(tt.name, func(t *testing.T) {
			if got := fp(EndpointSessionsSearch, tt.body); got == base {
				t.Fatalf("fingerprint is the same")
			}
		})
	}
}

func TestCursorDecoding(t *testing.T) {
	key := NewCursorKey()
	req, err := DecodeRequest(EndpointSessionsSearch, []byte(`{"query":"needle"}`))
	if err != nil {
		t.Fatal(err)
	}
	first := NewCursor(key, req, 7, "e1")
	first.Bound, first.Store = 10, strings.Repeat("ab", 12)
	good := first.At(3)
	other, _ := DecodeRequest(EndpointSessionsSearch, []byte(`{"query":"other"}`))
	list, _ := DecodeRequest(EndpointSessionsList, []byte(`{}`))
	tests := []struct {
		name    string
		req     *Request
		cursor  string
		message string
	}{
		{"text that is not base64url is invalid", req, "not-json!", "cursor is invalid: not base64url"},
		{"an unsigned cursor (the old format) was not issued by the service", req, strings.SplitN(good, ".", 2)[0], "cursor is invalid: it was not issued by this service"},
		{"a cursor under another key was not issued by the service", req, func() string { c := *first; c.key = NewCursorKey(); return c.At(3) }(), "cursor is invalid: it was not issued by this service"},
		{"a cursor with a forged generation was not issued by the service", req, forge(t, good, nil, "g", `1000000000000000`), "cursor is invalid: it was not issued by this service"},
		{"a cursor with a forged offset was not issued by the service", req, forge(t, good, nil, "o", `4`), "cursor is invalid: it was not issued by this service"},
		{"a cursor longer than any issued is invalid", req, strings.Repeat("a", MaxCursorBytes+1), "cursor is invalid: it is longer than any cursor this service issues"},
		{"a signed non-cursor is invalid", req, sign(key, []byte(`"x"`)), "cursor is invalid: not a cursor"},
		{"a cursor of another query is invalid", other, good, "cursor is invalid: it belongs to another request"},
		{"a cursor of another endpoint is invalid", list, good, "cursor is invalid: it belongs to another endpoint"},
		{"an offset of 1e100 is invalid", req, forge(t, good, key, "o", `1e100`), "cursor is invalid: offset out of range"},
		{"a negative offset is invalid", req, forge(t, good, key, "o", `-1`), "cursor is invalid: offset out of range"},
		{"a fractional offset is invalid", req, forge(t, good, key, "o", `1.5`), "cursor is invalid: offset out of range"},
		{"an offset past the bound is invalid", req, forge(t, good, key, "o", `11`), "cursor is invalid: offset out of range"},
		{"a generation past 2^53 is invalid", req, forge(t, good, key, "g", `9007199254740992`), "cursor is invalid: generation out of range"},
		{"a long epoch is invalid", req, forge(t, good, key, "p", `"`+strings.Repeat("e", 65)+`"`), "cursor is invalid: epoch out of range"},
		{"a captured seq on a search is invalid", req, forge(t, good, key, "c", `5`), "cursor is invalid: captured seq out of range"},
		{"an order key on a search is invalid", req, forge(t, good, key, "k", `"AAAA"`), "cursor is invalid: order key out of range"},
		{"a stored-results name that is not one is invalid", req, forge(t, good, key, "s", `"`+strings.Repeat("a", 1000)+`"`), "cursor is invalid: stored results out of range"},
		{"an unknown field is invalid", req, forge(t, good, key, "x", `1`), "cursor is invalid: not a cursor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := *tt.req
			r.Cursor = tt.cursor
			_, err := DecodeCursor(key, &r)
			if dshq.ErrorCode(err) != dshq.CodeInvalidCursor || err.Error() != tt.message {
				t.Fatalf("DecodeCursor = %v (%s); want INVALID_CURSOR %q", err, dshq.ErrorCode(err), tt.message)
			}
		})
	}
	t.Run("a cursor of the same request decodes", func(t *testing.T) {
		r := *req
		r.Cursor = good
		c, err := DecodeCursor(key, &r)
		if err != nil || c.Position != 3 || c.Generation != 7 || c.Lineage != "e1" || c.Store != first.Store {
			t.Fatalf("DecodeCursor = %+v, %v", c, err)
		}
		if next := c.At(5); !strings.Contains(next, ".") {
			t.Fatalf("a continued cursor %q is not signed", next)
		}
	})
}

func TestTextPattern(t *testing.T) {
	tests := []struct {
		name, text, doc string
		want            bool
	}{
		{"whitespace runs match any whitespace and case is folded", "hello   (ai)+", "Hello\n(AI)+", true},
		{"non-ASCII letters fold case", "CAFÉ", "un café", true},
		{"diacritics are not folded by the scan", "cafe", "café", false},
		{"regex syntax is literal", "a.c", "abc", false},
		{"the scan is unanchored", "mid", "amidst", true},
		{"Unicode whitespace separates parts", "a b", "a\u3000b", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := textPattern(tt.text).MatchString(tt.doc); got != tt.want {
				t.Fatalf("match(%q, %q) = %v; want %v", tt.text, tt.doc, got, tt.want)
			}
		})
	}
}

// forge rewrites one field of an encoded cursor; with key it signs the
// result (as a service holding the key would have issued it), without it
// it keeps the old MAC (a forgery).
func forge(t *testing.T, cur string, key CursorKey, field, value string) string {
	t.Helper()
	text, mac, _ := strings.Cut(cur, ".")
	raw, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m[field] = json.RawMessage(value)
	b, _ := json.Marshal(m)
	if key == nil {
		return base64.RawURLEncoding.EncodeToString(b) + "." + mac
	}
	return sign(key, b)
}

// sign encodes payload as a cursor issued under key.
func sign(key CursorKey, payload []byte) string {
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(key.mac(payload))
}

func TestFingerprint_OfAListOrder(t *testing.T) {
	fp := func(body string) string {
		t.Helper()
		r, err := DecodeRequest(EndpointSessionsList, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return fingerprint(r)
	}
	base := fp(`{}`)
	if fp(`{"order":"created-desc","summary":false}`) != base {
		t.Error("the default order and no summary written out change the fingerprint (a cursor issued before the addition would be refused)")
	}
	for _, body := range []string{`{"order":"created-asc"}`, `{"order":"activity-desc"}`, `{"summary":true}`} {
		if fp(body) == base {
			t.Errorf("%s has the fingerprint of the default list", body)
		}
	}
	if fp(`{"order":"activity-desc"}`) == fp(`{"order":"activity-asc"}`) {
		t.Error("the two directions share a fingerprint")
	}
}

func TestSessionMatcher_MachineAndCwdPrefix(t *testing.T) {
	str := func(s string) *string { return &s }
	rec := func(cwd *string, machine string) dshq.SessionRecord {
		return dshq.SessionRecord{Header: dshq.Header{ID: "s", Cwd: cwd, Machine: machine}}
	}
	tests := []struct {
		name string
		f    dshq.Filter
		r    dshq.SessionRecord
		want bool
	}{
		{"a machine matches its name", dshq.Filter{Kind: dshq.FilterMachine, Values: []*string{str("box")}}, rec(nil, "box"), true},
		{"another machine does not", dshq.Filter{Kind: dshq.FilterMachine, Values: []*string{str("box")}}, rec(nil, "other"), false},
		{"null matches a session with no machine", dshq.Filter{Kind: dshq.FilterMachine, Values: []*string{nil}}, rec(nil, ""), true},
		{"a prefix matches the directory itself", dshq.Filter{Kind: dshq.FilterCwdPrefix, Values: []*string{str("/w/p/")}}, rec(str("/w/p"), ""), true},
		{"a prefix matches under it", dshq.Filter{Kind: dshq.FilterCwdPrefix, Values: []*string{str("/w/p")}}, rec(str("/w/p/sub"), ""), true},
		{"a prefix is a directory, not a string prefix", dshq.Filter{Kind: dshq.FilterCwdPrefix, Values: []*string{str("/w/p")}}, rec(str("/w/project"), ""), false},
		{"a prefix never matches a session without cwd", dshq.Filter{Kind: dshq.FilterCwdPrefix, Values: []*string{str("/")}}, rec(nil, ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (SessionMatcher{tt.f}).Match(tt.r); got != tt.want {
				t.Errorf("match = %v, want %v", got, tt.want)
			}
		})
	}
}
