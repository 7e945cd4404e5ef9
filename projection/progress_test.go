package projection

import (
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq/index"
)

// lockedLog is a log destination safe for concurrent writes.
type lockedLog struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestProgressWhileCatchingUp(t *testing.T) {
	e := newEnv(t)
	last := e.publishAll(mixedCorpus(t))
	if last < 40 {
		t.Fatalf("only %d records", last)
	}
	// The loop is held after its first batch of 10, before the ack.
	held, release := make(chan Progress, 1), make(chan struct{})
	var once sync.Once
	var p *Projector
	logs := &lockedLog{}
	p = e.open(t.TempDir(), WithBatchSize(10), WithLogger(slog.New(slog.NewTextHandler(logs, nil))),
		withHook(func(point string, gen uint64) error {
			if point == "before-ack" {
				once.Do(func() { held <- p.Progress(); <-release })
			}
			return nil
		}))
	if pr := p.Progress(); pr.CatchingUp || pr.Generation != 0 {
		t.Errorf("before Run: %+v", pr)
	}
	r := run(t, p)
	pr := <-held
	if !pr.CatchingUp || pr.Generation == 0 || pr.Generation >= last || pr.StreamLastSeq != last {
		t.Errorf("after the first batch: %+v; want catching up, at a generation below %d of %d", pr, last, last)
	}
	if l := logs.String(); !strings.Contains(l, "catching up with the session stream") || !strings.Contains(l, "streamLastSeq="+itoa(last)) {
		t.Errorf("no catching-up line naming the stream's end:\n%s", l)
	}
	close(release)
	waitGen(t, p, last)
	waitFor(t, "caught up", func() bool { return !p.Progress().CatchingUp })
	if pr := p.Progress(); pr.Generation != last || pr.StreamLastSeq != last {
		t.Errorf("caught up: %+v", pr)
	}
	// Progress reports caught up once the generation reaches the stream's
	// end; the loop logs it when it notes that batch, just after.
	waitFor(t, "the caught-up line", func() bool { return strings.Contains(logs.String(), "caught up with the session stream") })
	t.Run("live records applied a batch at a time are no backlog", func(t *testing.T) {
		before := strings.Count(logs.String(), "catching up")
		next := e.publish(token(t, "s-live"), []byte(`{"type":"session","version":2,"id":"s-live","createdAt":1,"isSeeded":false}`))
		waitGen(t, p, next)
		if pr := p.Progress(); pr.CatchingUp {
			t.Errorf("%+v", pr)
		}
		if n := strings.Count(logs.String(), "catching up"); n != before {
			t.Errorf("a live record logged catching up:\n%s", logs.String())
		}
	})
	r.stop()
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

func TestAppliedCountersStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg, func() (index.Stats, error) { return index.Stats{}, nil }); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "dshq_projector_records_applied_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			kinds[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	if len(kinds) != 4 || kinds["header"] != 0 || kinds["event"] != 0 || kinds["invalid"] != 0 || kinds["quarantined"] != 0 {
		t.Errorf("before any record: %v; want header, event, invalid and quarantined at 0", kinds)
	}
}
