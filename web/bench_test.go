package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bench"
)

// BenchmarkUI measures the UI on the corpus `make bench` generates (800
// sessions, about 49 000 events) plus one session of 10 000 events: the
// server time of each page (ServeHTTP, the query calls over NATS included)
// beside the main query call of that page alone, measured in the same run,
// and the browser's first contentful paint of the 10 000-event session
// beside that of a 20-event one. Run it with `make bench-ui`
// (go test -run '^$' -bench UI -benchtime 1x ./web); DSH_UI_BENCH_SAMPLES
// sets the samples per figure (default 100).
func BenchmarkUI(b *testing.B) {
	samples := 100
	if n, err := strconv.Atoi(os.Getenv("DSH_UI_BENCH_SAMPLES")); err == nil && n > 0 {
		samples = n
	}
	s := newStack(b)
	corpus, big := loadBenchCorpus(b, s)
	ctx := context.Background()
	mid := corpus.Sessions[len(corpus.Sessions)/2]
	cwd := *mid.Header.Cwd
	rare, common := corpus.Rare[len(corpus.Rare)/2], corpus.Common[0]
	rows := []struct {
		name, path string
		refName    string
		ref        func() error
	}{
		{"sessions list, first page", "/", "sessions.list limit 50",
			func() error {
				_, err := s.ui.qc.ListSessions(ctx, dshq.SessionListRequest{Limit: DefaultListSize})
				return err
			}},
		{"sessions list, one workspace", "/?" + url.Values{"cwd": {cwd}}.Encode(), "sessions.filter cwd limit 50",
			func() error {
				_, err := s.ui.qc.FilterSessions(ctx, dshq.SessionFilterRequest{Filters: []dshq.Filter{{Kind: dshq.FilterCwd, Values: []*string{&cwd}}}, Limit: DefaultListSize})
				return err
			}},
		{"search, rare phrase", "/search?" + url.Values{"q": {rare}}.Encode(), "sessions.search limit 20",
			func() error {
				_, err := s.ui.qc.SearchSessions(ctx, dshq.SessionSearchRequest{Query: rare, Limit: searchLimit})
				return err
			}},
		{"search, common phrase", "/search?" + url.Values{"q": {common}}.Encode(), "sessions.search limit 20",
			func() error {
				_, err := s.ui.qc.SearchSessions(ctx, dshq.SessionSearchRequest{Query: common, Limit: searchLimit})
				return err
			}},
		{"session page, " + strconv.Itoa(mid.Events()) + " events", sessionURL(mid.Header.ID), "events.read 100-event window",
			func() error { return readWindow(ctx, s, mid.Header.ID, 50) }},
		{"10 000-event session, first page", sessionURL(big), "events.read 100-event window",
			func() error { return readWindow(ctx, s, big, 50) }},
		{"10 000-event session, log page 1", sessionURL(big) + "/log", "events.read 100-event window",
			func() error { return readWindow(ctx, s, big, 50) }},
		{"10 000-event session, page 50", sessionURL(big) + "?page=50", "events.read 100-event window",
			func() error { return readWindow(ctx, s, big, 5050) }},
		{"event page (trace)", traceURL(big, 5000), "events.trace",
			func() error {
				_, err := s.ui.qc.TraceEvent(ctx, dshq.EventTraceRequest{SessionID: big, Seq: 5000})
				return err
			}},
	}
	fmt.Printf("\nweb UI, %d sessions, %d events (+ one of 10 000); %d samples per figure after one warm-up\n", len(corpus.Sessions), corpus.Events(), samples)
	fmt.Printf("%-36s %10s %10s   %-30s %10s %10s %7s\n", "page (server time)", "p50", "p99", "reference: the query alone", "p50", "p99", "p50 ×")
	for _, r := range rows {
		got := measure(b, samples, func() error { return servePage(s, r.path) })
		want := measure(b, samples, r.ref)
		fmt.Printf("%-36s %10s %10s   %-30s %10s %10s %6.1f×\n", r.name, ms(pct(got, 50)), ms(pct(got, 99)), r.refName, ms(pct(want, 50)), ms(pct(want, 99)),
			float64(pct(got, 50))/float64(pct(want, 50)))
	}
	browserPaint(b, s, big, mid.Header.ID)
}

// loadBenchCorpus imports the bench corpus and a 10 000-event session (the
// first 10 000 events of a long generated one) and waits for the projection.
func loadBenchCorpus(b *testing.B, s *stack) (*bench.Corpus, string) {
	b.Helper()
	corpus, err := bench.GenerateCorpus(bench.CorpusConfig{Sessions: bench.DefaultSessions, Turns: bench.DefaultTurns, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	long, err := bench.GenerateCorpus(bench.CorpusConfig{Sessions: 1, Turns: 1000, Seed: 2})
	if err != nil {
		b.Fatal(err)
	}
	big := long.Sessions[0]
	big.Header.ID = "big-10k"
	events := slices.Concat(big.Batches...)
	if len(events) < 10000 {
		b.Fatalf("the long session has %d events", len(events))
	}
	big.Batches = [][]dshq.Event{events[:10000]}
	all := append(slices.Clone(corpus.Sessions), big)
	start := time.Now()
	var mu sync.Mutex // guards last, firstErr
	var last uint64
	var firstErr error
	work := make(chan bench.Session)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sess := range work {
				hdr := dshq.HeaderRecord{Header: sess.Header, FormatVersion: dshq.FormatVersion2, InheritedEventCount: sess.Inherited}
				res, err := s.store.Import(context.Background(), hdr, slices.Concat(sess.Batches...))
				mu.Lock()
				last = max(last, res.LastSeq)
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("import %s: %w", sess.Header.ID, err)
				}
				mu.Unlock()
			}
		}()
	}
	for _, sess := range all {
		work <- sess
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	s.waitGeneration(b, last)
	fmt.Printf("loaded %d sessions in %v\n", len(all), time.Since(start).Round(time.Millisecond))
	return corpus, big.Header.ID
}

func readWindow(ctx context.Context, s *stack, id string, seq int64) error {
	_, err := s.ui.qc.ReadEvent(ctx, dshq.EventReadRequest{SessionID: id, Seq: seq, Before: 50, After: 49})
	return err
}

// servePage serves path through the UI's handler and checks the answer.
func servePage(s *stack, path string) error {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Host = "127.0.0.1"
	w := httptest.NewRecorder()
	s.ui.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		return fmt.Errorf("GET %s: %d", path, w.Code)
	}
	return nil
}

// measure times fn samples times after one warm-up call.
func measure(b *testing.B, samples int, fn func() error) []time.Duration {
	b.Helper()
	if err := fn(); err != nil {
		b.Fatal(err)
	}
	out := make([]time.Duration, samples)
	for i := range out {
		start := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		out[i] = time.Since(start)
	}
	return out
}

// pct is the p-th percentile (nearest rank).
func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// browserPaint measures the first contentful paint of the 10 000-event
// session's first and middle pages beside a small session's, in headless
// Chromium (skipped without it, outside CI).
func browserPaint(b *testing.B, s *stack, big, small string) {
	b.Helper()
	bctx := newBrowser(b, 1280, 900)
	base := s.srv.URL
	paint := func(path string) time.Duration {
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("#events"))); err != nil {
			b.Fatal(err)
		}
		raw, err := chromedp.Run(ctx, chromedp.Poll[[]byte](`(() => { const p = performance.getEntriesByName('first-contentful-paint')[0]; return p ? JSON.stringify(p.startTime) : null; })()`,
			chromedp.WithPollingTimeout(10*time.Second)))
		if err != nil {
			b.Fatal(err)
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			b.Fatalf("paint entry %s: %v", raw, err)
		}
		f, _ := strconv.ParseFloat(s, 64)
		return time.Duration(f * float64(time.Millisecond))
	}
	const n = 15
	fmt.Printf("\nbrowser: first contentful paint after navigation, %d loads each\n", n)
	fmt.Printf("%-36s %10s %10s\n", "page", "p50", "max")
	for _, p := range []struct{ name, path string }{
		{"10 000-event session, first page", sessionURL(big)},
		{"10 000-event session, page 50", sessionURL(big) + "?page=50"},
		{"reference: a small session", sessionURL(small)},
	} {
		var d []time.Duration
		paint(p.path) // warm-up
		for range n {
			d = append(d, paint(p.path))
		}
		fmt.Printf("%-36s %10s %10s\n", p.name, ms(pct(d, 50)), ms(pct(d, 100)))
	}
}
