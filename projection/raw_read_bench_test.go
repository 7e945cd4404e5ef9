package projection

import (
	"context"
	"testing"
	"time"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/corpus"
)

// BenchmarkEventReads measures what a read of stored events costs through a
// Snapshot on the projected deepseek-harness corpus: a whole session's
// events (events.read of a long window, an export) and one event with its
// edges (events.read's anchor); beside them, one record read from the
// stream by its sequence (a direct get), what a store that kept no raw
// records would pay for each. Run it with:
//
//	go test -run '^$' -bench EventReads ./projection
func BenchmarkEventReads(b *testing.B) {
	logs := readCorpus(b, corpus.Require(b))
	e := newEnv(b)
	var recs [][2]string
	events := 0
	for _, l := range logs {
		tok := token(b, l.header.Header.ID)
		for _, ln := range l.lines {
			recs = append(recs, [2]string{tok, string(ln)})
		}
		events += len(l.events)
	}
	last := e.publishAsync(recs)
	r := e.start(b.TempDir())
	defer r.stop()
	waitGenWithin(b, r.p, last, 5*time.Minute)

	b.Run("session", func(b *testing.B) {
		n, bytes := 0, 0
		for i := 0; b.Loop(); i++ {
			l := logs[i%len(logs)]
			view(b, r.p, func(s Snapshot) error {
				return s.Events(l.header.Header.ID, 0, func(ev dshq.StoredEvent) bool {
					n, bytes = n+1, bytes+len(ev.Raw)
					return true
				})
			})
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
		b.ReportMetric(float64(bytes)/float64(n), "raw-B/event")
	})
	b.Run("event", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			l := logs[i%len(logs)]
			if len(l.events) == 0 {
				continue
			}
			seq := int64(i/len(logs)) % int64(len(l.events))
			view(b, r.p, func(s Snapshot) error {
				if _, ok := s.Event(l.header.Header.ID, seq); !ok {
					b.Fatalf("%s seq %d: not found", l.name, seq)
				}
				return nil
			})
		}
	})
	b.Run("stream-direct-get", func(b *testing.B) {
		ctx := context.Background()
		stream, err := e.js.Stream(ctx, dshq.SessionStream)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			if _, err := stream.GetMsg(ctx, uint64(i)%last+1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
