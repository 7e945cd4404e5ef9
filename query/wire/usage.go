package wire

import (
	"encoding/json"
	"math"
	"slices"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/usage"
)

// EndpointUsageReport is usage.report: the tokens and cost the agents
// spent, filtered and grouped (docs/usage.md, docs/protocol.md#3-the-trusted-query-api).
const EndpointUsageReport = "usage.report"

// Usage report limits: rows per reply by default and at most.
const (
	DefaultUsageLimit = 1000
	MaxUsageLimit     = 10000
)

// UsageRequest is a decoded usage.report request.
type UsageRequest struct {
	Query usage.Query
	// Prices is the request's pricing table: the built-in one with the
	// request's prices over it.
	Prices *usage.Prices
}

var usageFields = []string{"since", "until", "timeZone", "cwd", "prefix", "harness", "machine", "branch", "model",
	"tenant", "sessionIds", "groupBy", "rollup", "prices", "limit"}

// UsageReply is the usage.report reply: a usage.Report and the
// generation it was read at.
type UsageReply struct {
	usage.Report
	Generation uint64 `json:"generation"`
}

func decodeUsageRequest(f map[string]json.RawMessage, r *Request) error {
	u := &UsageRequest{Prices: usage.Builtin()}
	q := &u.Query
	q.Location = time.UTC
	if raw, ok := f["timeZone"]; ok {
		var tz string
		if json.Unmarshal(raw, &tz) != nil || tz == "" {
			return dshq.Errorf(dshq.CodeInvalidFilter, "timeZone must be an IANA time zone name")
		}
		loc, err := time.LoadLocation(tz)
		if err != nil || tz == "Local" {
			return dshq.Errorf(dshq.CodeInvalidFilter, "timeZone %s is not an IANA time zone this service knows", dshq.Quote(tz))
		}
		q.Location = loc
	}
	var err error
	if q.Since, err = usageTime(f, "since", q.Location, false); err != nil {
		return err
	}
	if q.Until, err = usageTime(f, "until", q.Location, true); err != nil {
		return err
	}
	for name, dst := range map[string]*[]string{"cwd": &q.Cwds, "prefix": &q.Prefixes, "harness": &q.Harness,
		"machine": &q.Machines, "branch": &q.Branches, "model": &q.Models, "tenant": &q.Tenants} {
		if *dst, err = stringList(f, name); err != nil {
			return err
		}
	}
	if raw, ok := f["sessionIds"]; ok && jsonKind(raw) != kindNull {
		ids, err := decodeSessionIDs(f)
		if err != nil {
			return err
		}
		q.Sessions = ids
	}
	q.GroupBy = []usage.Dimension{usage.Day}
	if raw, ok := f["groupBy"]; ok {
		names, err := stringList(f, "groupBy")
		if err != nil || len(names) == 0 || jsonKind(raw) == kindNull {
			return dshq.Errorf(dshq.CodeInvalidRequest, "groupBy must be a non-empty array of dimensions")
		}
		q.GroupBy = nil
		for _, n := range names {
			d, err := usage.ParseDimension(n)
			if err != nil {
				return dshq.Errorf(dshq.CodeInvalidRequest, "groupBy: %v", err)
			}
			if slices.Contains(q.GroupBy, d) {
				return dshq.Errorf(dshq.CodeInvalidRequest, "groupBy names %s twice", d)
			}
			q.GroupBy = append(q.GroupBy, d)
		}
	}
	if raw, ok := f["rollup"]; ok && json.Unmarshal(raw, &q.Rollup) != nil {
		return dshq.Errorf(dshq.CodeInvalidRequest, "rollup must be a boolean")
	}
	if r.Limit, err = decodeLimit(f, DefaultUsageLimit, MaxUsageLimit); err != nil {
		return err
	}
	q.Limit = r.Limit
	if raw, ok := f["prices"]; ok && jsonKind(raw) != kindNull {
		o, err := usage.ParsePrices(raw)
		if err != nil {
			return dshq.Errorf(dshq.CodeInvalidRequest, "prices: %v", err)
		}
		u.Prices = u.Prices.Override(o)
	}
	r.Usage = u
	return nil
}

// usageTime reads a bound: a date (YYYY-MM-DD, in the zone; an until
// date includes its whole day) or an RFC 3339 time.
func usageTime(f map[string]json.RawMessage, name string, loc *time.Location, until bool) (time.Time, error) {
	raw, ok := f[name]
	if !ok || jsonKind(raw) == kindNull {
		return time.Time{}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return time.Time{}, dshq.Errorf(dshq.CodeInvalidFilter, "%s must be a date (YYYY-MM-DD) or an RFC 3339 time", name)
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, loc); err == nil {
		if until {
			t = t.AddDate(0, 0, 1)
		}
		return t, nil
	}
	if t, err := time.ParseInLocation("20060102", s, loc); err == nil {
		if until {
			t = t.AddDate(0, 0, 1)
		}
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, dshq.Errorf(dshq.CodeInvalidFilter, "%s %s is not a date (YYYY-MM-DD) or an RFC 3339 time", name, dshq.Quote(s))
	}
	return t, nil
}

// stringList reads a filter: a string or an array of strings.
func stringList(f map[string]json.RawMessage, name string) ([]string, error) {
	raw, ok := f[name]
	if !ok || jsonKind(raw) == kindNull {
		return nil, nil
	}
	var one string
	if jsonKind(raw) == kindString && json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if jsonKind(raw) != kindArray || json.Unmarshal(raw, &many) != nil {
		return nil, dshq.Errorf(dshq.CodeInvalidFilter, "%s must be a string or an array of strings", name)
	}
	return many, nil
}

// MergeUsage sums the usage.report replies of a partitioned projection's
// shards into the reply of the whole.
func MergeUsage(u *UsageRequest, parts []UsageReply) UsageReply {
	reps := make([]usage.Report, len(parts))
	gen := uint64(math.MaxUint64)
	for i, p := range parts {
		reps[i] = p.Report
		gen = min(gen, p.Generation)
	}
	if len(parts) == 0 {
		gen = 0
	}
	return UsageReply{Report: usage.Merge(u.Query, u.Prices, reps), Generation: gen}
}

// UsageBody is the request body of a usage.report (for clients).
type UsageBody struct {
	Since      string          `json:"since,omitempty"`
	Until      string          `json:"until,omitempty"`
	TimeZone   string          `json:"timeZone,omitempty"`
	Cwd        []string        `json:"cwd,omitempty"`
	Prefix     []string        `json:"prefix,omitempty"`
	Harness    []string        `json:"harness,omitempty"`
	Machine    []string        `json:"machine,omitempty"`
	Branch     []string        `json:"branch,omitempty"`
	Model      []string        `json:"model,omitempty"`
	Tenant     []string        `json:"tenant,omitempty"`
	SessionIDs []string        `json:"sessionIds,omitempty"`
	GroupBy    []string        `json:"groupBy,omitempty"`
	Rollup     bool            `json:"rollup,omitempty"`
	Prices     json.RawMessage `json:"prices,omitempty"`
	Limit      int             `json:"limit,omitempty"`
}
