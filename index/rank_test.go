package index

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/blevesearch/bleve/v2"
	"github.com/dshq/dshq"
)

// tiedCorpus has many exact ties: 400 sessions of short docs from a handful
// of texts over four times, and one session "big" of 900 such docs.
func tiedCorpus() []Doc {
	r := rand.New(rand.NewPCG(11, 12))
	texts := []string{"needle", "needle pad", "needle needle", "pad needle pad", "needle other pad", "other"}
	var docs []Doc
	for i := 0; i < 2400; i++ {
		sid := fmt.Sprintf("s%03d", r.IntN(400))
		if i%8 < 3 {
			sid = "big"
		}
		docs = append(docs, doc(sid, int64(i), int64(r.IntN(4)), texts[r.IntN(len(texts))]))
	}
	return docs
}

// referenceOrder ranks every match of "needle" the slow, obvious way: scores
// from Bleve with each doc's stored time loaded, then the tie-break sorted
// in Go (score desc, time desc, session id asc, seq desc).
func referenceOrder(t *testing.T, x *Index, sessionID string) []Key {
	t.Helper()
	_, tq := x.phrase("needle")
	var fs filterSet
	if sessionID != "" {
		fs.addTerms(fieldSession, []string{sessionID})
	}
	q, _ := withFilters(tq, &fs, 0)
	req := bleve.NewSearchRequestOptions(q, 100000, 0, false)
	req.Fields = []string{fieldTime}
	res, err := x.idx.Search(req)
	must(t, err)
	type ref struct {
		Key
		time float64
	}
	refs := make([]ref, len(res.Hits))
	for i, h := range res.Hits {
		gen, sid, seq, err := ParseDocID(h.ID)
		must(t, err)
		refs[i] = ref{Key{SessionID: sid, Seq: seq, Gen: gen, Score: h.Score}, h.Fields[fieldTime].(float64)}
	}
	sort.Slice(refs, func(i, j int) bool {
		a, b := refs[i], refs[j]
		switch {
		case a.Score != b.Score:
			return a.Score > b.Score
		case a.time != b.time:
			return a.time > b.time
		case a.SessionID != b.SessionID:
			return a.SessionID < b.SessionID
		}
		return a.Seq > b.Seq
	})
	out := make([]Key, len(refs))
	for i, r := range refs {
		out[i] = r.Key
		out[i].Time = int64(r.time) // as RankSessions gives it
	}
	return out
}

// TestRankingMatchesTheReferenceOrder: RankEvents and RankSessions, which
// read no stored doc, give exactly the order of the reference (stored
// times, tie-break in Go) on a corpus of many exact ties, page after page;
// Search* give the same keys, and Hits of the ranked keys gives the same
// hits as Search*.
func TestRankingMatchesTheReferenceOrder(t *testing.T) {
	x, _ := openTest(t)
	apply(t, x, 1, tiedCorpus()...)
	ctx := context.Background()
	events := referenceOrder(t, x, "big")
	for i := range events {
		events[i].Time = 0 // RankEvents gives no time
	}
	var sessions []Key
	seen := map[string]bool{}
	for _, k := range referenceOrder(t, x, "") {
		if !seen[k.SessionID] {
			seen[k.SessionID] = true
			sessions = append(sessions, k)
		}
	}
	if len(events) < 500 || len(sessions) < 300 {
		t.Fatalf("corpus too small: %d events, %d sessions", len(events), len(sessions))
	}
	pages := []struct{ offset, limit int }{{0, 20}, {0, 100}, {37, 13}, {0, MaxLimit}, {390, 50}, {700, 200}}
	check := func(t *testing.T, want []Key, offset, limit int, r Ranking, p Page, err error) {
		t.Helper()
		must(t, err)
		end := min(len(want), offset+limit)
		wantKeys := want[min(offset, end):end]
		if len(wantKeys) == 0 {
			wantKeys = nil
		}
		if !reflect.DeepEqual(r.Keys, wantKeys) {
			t.Fatalf("ranked keys differ from the reference:\ngot  %v\nwant %v", r.Keys, wantKeys)
		}
		if r.More != (end < len(want)) || p.More != r.More {
			t.Fatalf("more = %v (page %v) with %d of %d", r.More, p.More, end, len(want))
		}
		hits, err := x.Hits(ctx, "needle", r.Keys, 0)
		must(t, err)
		if len(hits) != len(p.Hits) {
			t.Fatalf("Hits gave %d hits, the search %d", len(hits), len(p.Hits))
		}
		for i, h := range p.Hits {
			k := r.Keys[i]
			if h.SessionID != k.SessionID || h.Seq != k.Seq || h.Score != k.Score || !reflect.DeepEqual(hits[i], h) {
				t.Fatalf("hit %d: search %+v, Hits %+v, key %+v", i, h, hits[i], k)
			}
		}
	}
	for _, c := range pages {
		t.Run(fmt.Sprintf("events offset %d limit %d", c.offset, c.limit), func(t *testing.T) {
			q := EventQuery{SessionID: "big", Query: "needle", Offset: c.offset, Limit: c.limit}
			r, err := x.RankEvents(ctx, q)
			must(t, err)
			p := searchEvents(t, x, q)
			check(t, events, c.offset, c.limit, r, p, err)
		})
		t.Run(fmt.Sprintf("sessions offset %d limit %d", c.offset, c.limit), func(t *testing.T) {
			q := SessionQuery{Query: "needle", Offset: c.offset, Limit: c.limit}
			r, err := x.RankSessions(ctx, q)
			must(t, err)
			p := searchSessions(t, x, q)
			check(t, sessions, c.offset, c.limit, r, p, err)
		})
	}
}

// TestHitsOfKeys: Hits keeps the keys' order and scores, skips a key whose
// doc is gone, cuts snippets at the phrase, and refuses bad input with a
// typed error.
func TestHitsOfKeys(t *testing.T) {
	x, _ := openTest(t)
	ctx := context.Background()
	apply(t, x, 1, doc("a", 1, 5, strings.Repeat("pad ", 40)+"the needle here"), doc("b", 2, 5, "a needle"))
	keys := []Key{{SessionID: "b", Seq: 2, Gen: 1, Score: 0.5}, {SessionID: "gone", Seq: 9, Gen: 1, Score: 0.4}, {SessionID: "a", Seq: 1, Gen: 1, Score: 0.25}}
	hits, err := x.Hits(ctx, "  needle ", keys, 20)
	must(t, err)
	got := make([]string, len(hits))
	for i, h := range hits {
		got[i] = fmt.Sprintf("%s#%d %v %q", h.SessionID, h.Seq, h.Score, h.Snippet)
	}
	want := []string{`b#2 0.5 "a needle"`, `a#1 0.25 "…pad the needle here"`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if hs, err := x.Hits(ctx, "needle", nil, 0); err != nil || len(hs) != 0 {
		t.Fatalf("no keys: %v, %v", hs, err)
	}
	for _, c := range []struct {
		name  string
		query string
		chars int
		code  dshq.Code
	}{
		{"a blank query is invalid", " \t", 0, dshq.CodeInvalidQuery},
		{"negative snippet chars are invalid", "needle", -1, dshq.CodeInvalidConfig},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := x.Hits(ctx, c.query, keys, c.chars)
			if code := dshq.ErrorCode(err); code != c.code {
				t.Fatalf("code %q (%v), want %q", code, err, c.code)
			}
		})
	}
	t.Run("a closed index is ErrClosed", func(t *testing.T) {
		must(t, x.Close())
		if _, err := x.Hits(ctx, "needle", keys, 0); !errors.Is(err, ErrClosed) {
			t.Fatalf("err = %v, want ErrClosed", err)
		}
	})
}

// TestRankingReportsTheGenerationItSearched: each batch adds one doc (and
// one session), so a ranking that read generation g finds exactly g keys,
// even while batches land during the ranking.
func TestRankingReportsTheGenerationItSearched(t *testing.T) {
	x, _ := openTest(t)
	ctx := context.Background()
	const batches = 60
	done := make(chan error, 1)
	go func() {
		for g := uint64(1); g <= batches; g++ {
			var b Batch
			b.Upsert(doc(fmt.Sprintf("s%03d", g), 0, int64(g), "needle"))
			b.Upsert(doc("one", int64(g), int64(g), "needle"))
			if err := x.Apply(ctx, &b, g); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	check := func() {
		t.Helper()
		r, err := x.RankEvents(ctx, EventQuery{SessionID: "one", Query: "needle", Limit: MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(r.Keys)) != r.Searched || r.Searched < r.Generation {
			t.Fatalf("RankEvents: %d keys, searched %d, generation %d", len(r.Keys), r.Searched, r.Generation)
		}
		s, err := x.RankSessions(ctx, SessionQuery{Query: "needle", Limit: MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		// Every batch adds session s<g>; "one" is there from the first.
		want := s.Searched + 1
		if s.Searched == 0 {
			want = 0
		}
		if uint64(len(s.Keys)) != want || s.Searched < s.Generation {
			t.Fatalf("RankSessions: %d keys, searched %d, generation %d", len(s.Keys), s.Searched, s.Generation)
		}
	}
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			running = false
		default:
		}
		check()
	}
	check()
	r, err := x.RankEvents(ctx, EventQuery{SessionID: "one", Query: "needle", Limit: 1})
	if err != nil || r.Searched != batches {
		t.Fatalf("after the batches: searched %d (%v), want %d", r.Searched, err, batches)
	}
}
