package wire

import (
	"errors"
	"testing"

	"github.com/dshq/dshq"
)

// FuzzDecodeRequest: any body for any endpoint decodes or fails with a
// *dshq.Error of the request codes — never a panic.
func FuzzDecodeRequest(f *testing.F) {
	seeds := []string{`{}`, `[]`, `{"query":"a","limit":1e2}`, `{"sessionId":"s","seq":-0.5,"before":50}`,
		`{"filters":[{"kind":"cwd","values":[null,"x"]},{"kind":"seq","from":1,"to":0}]}`,
		`{"sessionIds":["a","a"]}`, `{"cursor":"eyJ2IjoxfQ","timeoutMs":30000,"minGeneration":9007199254740991}`,
		"{\"query\":\"\\u0000\"}", `{"sessionFilters":[{"kind":"availability","values":["live","persisted"]}],"eventFilters":[{"kind":"text"}]}`}
	for i, s := range seeds {
		f.Add(i, []byte(s))
	}
	allowed := map[dshq.Code]bool{dshq.CodeInvalidRequest: true, dshq.CodeInvalidFilter: true, dshq.CodeInvalidCursor: true,
		dshq.CodeInvalidQuery: true, dshq.CodeInvalidLimit: true, dshq.CodeInvalidWindow: true}
	f.Fuzz(func(t *testing.T, ep int, body []byte) {
		endpoint := Endpoints[uint(ep)%uint(len(Endpoints))]
		req, err := DecodeRequest(endpoint, body)
		if err != nil {
			var de *dshq.Error
			if !errors.As(err, &de) || !allowed[de.Code] || de.Message == "" {
				t.Fatalf("DecodeRequest(%s, %q) = %v (%T)", endpoint, body, err, err)
			}
			return
		}
		if req.Endpoint != endpoint || req.TimeoutMs < 1 || req.TimeoutMs > dshq.MaxTimeoutMs {
			t.Fatalf("request %+v", req)
		}
		req.Cursor = string(body)
		_, _ = DecodeCursor(NewCursorKey(), req)
		_ = fingerprint(req)
	})
}
