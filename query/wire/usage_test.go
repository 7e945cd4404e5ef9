package wire

import (
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/usage"
)

func TestDecodeUsageRequest(t *testing.T) {
	t.Run("a full request is normalized", func(t *testing.T) {
		r, err := DecodeRequest(EndpointUsageReport, []byte(`{"since":"2026-03-01","until":"2026-03-01","timeZone":"Asia/Kolkata",
			"prefix":"/work","machine":["a","b"],"groupBy":["daily","cwd"],"rollup":true,"limit":5,
			"prices":{"source":"ours","date":"2026-12-01","models":{"m-1":{"input":1,"output":2}}}}`))
		if err != nil {
			t.Fatal(err)
		}
		q := r.Usage.Query
		loc, _ := time.LoadLocation("Asia/Kolkata")
		if !q.Since.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, loc)) || !q.Until.Equal(time.Date(2026, 3, 2, 0, 0, 0, 0, loc)) {
			t.Errorf("since %v until %v: want the whole of 1 March in Kolkata", q.Since, q.Until)
		}
		if len(q.GroupBy) != 2 || q.GroupBy[0] != usage.Day || q.GroupBy[1] != usage.Project || !q.Rollup || q.Limit != 5 {
			t.Errorf("query %+v", q)
		}
		if len(q.Prefixes) != 1 || len(q.Machines) != 2 {
			t.Errorf("filters %+v", q)
		}
		if _, ok := r.Usage.Prices.Lookup("m-1"); !ok {
			t.Error("the request's price is not in the table")
		}
		if _, ok := r.Usage.Prices.Lookup("claude-opus-4-6"); !ok {
			t.Error("the built-in prices are gone")
		}
	})
	for _, c := range []struct {
		name, body string
		code       dshq.Code
	}{
		{"an unknown time zone", `{"timeZone":"Mars/Olympus"}`, dshq.CodeInvalidFilter},
		{"the server's Local zone", `{"timeZone":"Local"}`, dshq.CodeInvalidFilter},
		{"a since that is no date", `{"since":"yesterday"}`, dshq.CodeInvalidFilter},
		{"a filter of numbers", `{"model":[1]}`, dshq.CodeInvalidFilter},
		{"an unknown dimension", `{"groupBy":["colour"]}`, dshq.CodeInvalidRequest},
		{"a dimension twice", `{"groupBy":["day","daily"]}`, dshq.CodeInvalidRequest},
		{"an empty groupBy", `{"groupBy":[]}`, dshq.CodeInvalidRequest},
		{"a negative price", `{"prices":{"models":{"m":{"input":-1,"output":0}}}}`, dshq.CodeInvalidRequest},
		{"a limit too large", `{"limit":10001}`, dshq.CodeInvalidLimit},
		{"an unknown field", `{"colour":"blue"}`, dshq.CodeInvalidRequest},
		{"an invalid session id", `{"sessionIds":["a\u0000b"]}`, dshq.CodeInvalidRequest},
	} {
		t.Run(c.name+" is refused", func(t *testing.T) {
			_, err := DecodeRequest(EndpointUsageReport, []byte(c.body))
			if dshq.ErrorCode(err) != c.code {
				t.Errorf("%s: %v, want %s", c.body, err, c.code)
			}
		})
	}
}
