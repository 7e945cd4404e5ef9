package projection

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/index"
)

const (
	goodHeader = `{"type":"session","version":2,"id":"%s","createdAt":1788000000000,"cwd":"/w","isSeeded":false}`
	turnStart  = `{"type":"turn/start","seq":%d,"time":1788000000100,"data":{"turn":1}}`
	userMsg    = `{"type":"user/message","seq":%d,"time":1788000000101,"data":{"id":"m","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"hello quarantine"}]},"surfaceOp":"append"}`
)

func line(format string, args ...any) []byte { return []byte(fmt.Sprintf(format, args...)) }

func TestProjector_QuarantinesBadRecordsWhileOtherSessionsFlow(t *testing.T) {
	cases := []struct {
		name string
		id   string // session id ("" when the subject holds no session)
		tok  string // subject token when it differs from the id's
		log  [][]byte
		// invalidFrom is the seq the session is invalid from (-1 = valid,
		// -2 = no session at all).
		invalidFrom int64
		events      int64 // events stored
		quarantined int   // quarantine entries on this subject
		reason      string
	}{
		{
			name: "a header of an unknown version quarantines the subject",
			id:   "q-version", log: [][]byte{
				line(`{"type":"session","version":7,"id":"q-version","createdAt":1,"isSeeded":false}`),
				line(turnStart, 0),
			},
			invalidFrom: -2, quarantined: 2, reason: "version",
		},
		{
			name: "a header that is not JSON quarantines the subject",
			tok:  "q-garbage", log: [][]byte{line(`{"type":"session",`), line(turnStart, 0)},
			invalidFrom: -2, quarantined: 2, reason: "invalid header record",
		},
		{
			name: "an oversized bad record is kept capped",
			tok:  "q-big", log: [][]byte{append([]byte(`{"type":"session","version":2,"id":"q-big","createdAt":1,"isSeeded":false,"pad":"`), strings.Repeat("x", 2*MaxQuarantineRawBytes)...)},
			invalidFrom: -2, quarantined: 1, reason: "invalid header record",
		},
		{
			name: "a header on another session's subject quarantines the subject",
			id:   "q-elsewhere", tok: "q-wrong-subject", log: [][]byte{line(goodHeader, "q-elsewhere")},
			invalidFrom: -2, quarantined: 1, reason: "subject token",
		},
		{
			name: "an event that is not JSON marks its session invalid from its seq",
			id:   "q-notjson", log: [][]byte{line(goodHeader, "q-notjson"), line(turnStart, 0), line(`not json`), line(userMsg, 2)},
			invalidFrom: 1, events: 3, quarantined: 1, reason: "invalid event record",
		},
		{
			name: "an event breaking the fold's rules marks its session invalid",
			id:   "q-fold", log: [][]byte{line(goodHeader, "q-fold"), line(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"surfaceOp":"append"}`), line(userMsg, 1)},
			invalidFrom: 0, events: 2, quarantined: 1, reason: "surfaceOp",
		},
		{
			name: "an identical duplicate is quarantined and skipped, the session stays valid",
			id:   "q-dup", log: [][]byte{line(goodHeader, "q-dup"), line(turnStart, 0), line(userMsg, 1), line(userMsg, 1), line(turnStart, 0), line(goodHeader, "q-dup")},
			invalidFrom: -1, events: 2, quarantined: 3, reason: "duplicate of the applied event at seq 1",
		},
		{
			name: "a different record at an applied seq marks the session invalid",
			id:   "q-conflict", log: [][]byte{line(goodHeader, "q-conflict"), line(turnStart, 0), line(userMsg, 1), line(`{"type":"turn/start","seq":1,"time":5,"data":{"turn":2}}`)},
			invalidFrom: 2, events: 3, quarantined: 1, reason: "seq",
		},
		{
			name: "an out-of-order seq is quarantined",
			id:   "q-gap", log: [][]byte{line(goodHeader, "q-gap"), line(turnStart, 0), line(userMsg, 3)},
			invalidFrom: 1, events: 2, quarantined: 1, reason: "seq",
		},
	}
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var commits []Commit
	r := e.start(t.TempDir(), WithRegisterer(reg), WithOnCommit(func(c Commit) {
		mu.Lock()
		commits = append(commits, c)
		mu.Unlock()
	}))
	subjects := map[string]string{}
	for _, c := range cases {
		tok := c.tok
		if tok == "" {
			tok = token(t, c.id)
		}
		subjects[c.name] = dshq.LogSubjectPrefix + tok
		for _, l := range c.log {
			e.publish(tok, l)
		}
	}
	e.publish("a.b.c", line(goodHeader, "q-nested")) // neither dsh.log.<token> nor dsh.log.<tenant>.<token>
	goodID, last := e.publishLog(readLines(t, "upstream-2.5.jsonl"))
	waitGen(t, r.p, last)

	total := 1
	view(t, r.p, func(s Snapshot) error {
		byKey := map[string][]QuarantineRecord{}
		if err := s.Quarantined(0, func(q QuarantineRecord) bool {
			byKey[q.Subject] = append(byKey[q.Subject], q)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if got := byKey["dsh.log.a.b.c"]; len(got) != 1 || !strings.Contains(got[0].Reason, "is not dsh.log.<token> or dsh.log.<tenant>.<token>") {
			t.Errorf("nested subject: quarantine = %+v", got)
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				qs := byKey[subjects[c.name]]
				total += len(qs)
				if len(qs) != c.quarantined {
					t.Fatalf("%d quarantined records, want %d: %+v", len(qs), c.quarantined, qs)
				}
				if !strings.Contains(qs[0].Reason, c.reason) {
					t.Errorf("reason %q does not mention %q", qs[0].Reason, c.reason)
				}
				if len(qs[0].Raw) == 0 || len(qs[0].Raw) > MaxQuarantineRawBytes || qs[0].Truncated != (len(qs[0].Raw) == MaxQuarantineRawBytes) {
					t.Errorf("quarantined raw record: %d bytes, truncated %v", len(qs[0].Raw), qs[0].Truncated)
				}
				info, ok := s.Session(c.id)
				if c.invalidFrom == -2 {
					if ok && c.id != "" {
						t.Fatalf("session %q exists: %+v", c.id, info)
					}
					return
				}
				if !ok {
					t.Fatalf("session %q missing", c.id)
				}
				if c.invalidFrom == -1 {
					if !info.Valid() || info.EventCount != c.events {
						t.Errorf("session %+v, want valid with %d events", info, c.events)
					}
					return
				}
				if info.InvalidFrom != c.invalidFrom || info.EventCount != c.events {
					t.Errorf("invalidFrom %d events %d; want %d %d", info.InvalidFrom, info.EventCount, c.invalidFrom, c.events)
				}
				if info.ReclassifiedAt == 0 || info.InvalidReason == "" {
					t.Errorf("invalid session lacks reclassification generation or reason: %+v", info)
				}
				for seq := c.invalidFrom; seq < c.events; seq++ {
					ev, ok := s.Event(c.id, seq)
					if !ok || !ev.Invalid || len(ev.Raw) == 0 {
						t.Errorf("event %d: stored=%v invalid=%v raw=%d bytes", seq, ok, ev.Invalid, len(ev.Raw))
					}
				}
				if cl, err := s.Closers(c.id); err != nil || cl != nil {
					t.Errorf("closers of an invalid session: %v, %v", cl, err)
				}
			})
		}
		if info, ok := s.Session(goodID); !ok || !info.Valid() || info.EventCount != 18 {
			t.Errorf("the good session did not flow: %+v", info)
		}
		return nil
	})
	// Invalid sessions leave the index.
	dump := dumpIndex(t, r.p)
	for _, c := range cases {
		if c.invalidFrom < 0 {
			continue
		}
		page, err := r.p.Index().SearchEvents(context.Background(), index.EventQuery{SessionID: c.id, Query: "hello quarantine"})
		if err != nil || len(page.Hits) != 0 {
			t.Errorf("index still holds invalid session %s: %+v %v", c.id, page.Hits, err)
		}
	}
	if !strings.Contains(dump, "q-dup/1 user/message current") {
		t.Errorf("index lacks the valid session with a skipped duplicate:\n%s", dump)
	}

	// A session already indexed that turns invalid in a later batch leaves
	// the index.
	search := func() int {
		page, err := r.p.Index().SearchEvents(context.Background(), index.EventQuery{SessionID: goodID, Query: "retry budget"})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Hits)
	}
	if search() == 0 {
		t.Fatal("the good session is not searchable")
	}
	waitGen(t, r.p, e.publish(token(t, goodID), line(turnStart, 3)))
	if n := search(); n != 0 {
		t.Errorf("%d hits in a session that became invalid", n)
	}
	total++
	if got := counterValue(t, r.p.metrics.quarantined); int(got) != total {
		t.Errorf("quarantine metric = %v, want %d", got, total)
	}
	// The hook runs just after the generation is published (waitGen may
	// return first).
	seen := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, c := range commits {
			n += len(c.Quarantined)
		}
		return n
	}
	waitFor(t, fmt.Sprintf("OnCommit to see %d quarantined records", total), func() bool { return seen() >= total })
	if n := seen(); n != total {
		t.Errorf("OnCommit saw %d quarantined records, want %d", n, total)
	}
}

func counterValue(t testing.TB, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
