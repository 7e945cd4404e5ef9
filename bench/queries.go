package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/projection"
)

// collect reads every session, raw event and search document back from the
// serving projection: the references index exactly the same documents.
func (r *runner) collect(ctx context.Context) ([]FTSSession, error) {
	var out []FTSSession
	err := r.proj.View(ctx, r.last, func(s projection.Snapshot) error {
		var err error
		walk := s.SessionsByCreated(nil, func(info projection.SessionInfo) bool {
			fs := FTSSession{Header: info.Header.Header, HeaderRaw: info.Header.Raw, Inherited: info.Header.InheritedEventCount}
			err = s.Events(info.Header.Header.ID, 0, func(e projection.StoredEvent) bool {
				fs.Events = append(fs.Events, e.Raw)
				if e.Text != "" {
					fs.Docs = append(fs.Docs, dshq.SearchDocument{EventRecord: e.Record, Text: e.Text})
				}
				return true
			})
			out = append(out, fs)
			return err == nil
		})
		if walk != nil {
			return walk
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the projection back: %w", err)
	}
	return out, nil
}

// measureQueries loads the projected documents into the SQLite FTS5
// baseline and a raw Bleve index, then times searches and reads through the
// query service beside the same work on each reference.
func (r *runner) measureQueries(ctx context.Context) error {
	sessions, err := r.collect(ctx)
	if err != nil {
		return err
	}
	events, docs := 0, 0
	for _, s := range sessions {
		events += len(s.Events)
		docs += len(s.Docs)
	}
	r.rep.Documents = docs
	r.progress("SQLite FTS5 load: %d sessions, %d events, %d documents", len(sessions), events, docs)
	fts, err := OpenFTS(ctx, filepath.Join(r.dir, "fts.sqlite"))
	if err != nil {
		return err
	}
	defer fts.Close()
	start := time.Now()
	if err := fts.Load(ctx, sessions); err != nil {
		return err
	}
	r.rep.section = sectionThroughput
	r.rep.add("ingest to searchable (events/s)", r.ingestRate, "SQLite FTS5 bulk load of the same logs, one tx (events/s)", float64(events)/time.Since(start).Seconds())

	r.progress("raw Bleve index: %d documents", docs)
	idx, elapsed, err := rawBleve(filepath.Join(r.dir, "raw.bleve"), sessions)
	if err != nil {
		return err
	}
	defer idx.Close()
	r.rep.add("projector apply (records/s)", r.applyRate, "raw Bleve batch index, same docs (rec/s equiv.)", float64(r.rep.Records)/elapsed.Seconds())

	return r.searchAndRead(ctx, fts, idx, sessions)
}

// rawBleve indexes every document into a new on-disk Bleve index with the
// default mapping, in batches, and returns the time it took.
func rawBleve(path string, sessions []FTSSession) (bleve.Index, time.Duration, error) {
	idx, err := bleve.New(path, bleve.NewIndexMapping())
	if err != nil {
		return nil, 0, fmt.Errorf("raw bleve: %w", err)
	}
	start := time.Now()
	b := idx.NewBatch()
	for _, s := range sessions {
		for _, d := range s.Docs {
			doc := map[string]any{"text": d.Text, "sessionId": d.SessionID, "seq": d.Seq, "type": d.Type, "time": d.Time, "surface": string(d.Surface)}
			if err := b.Index(d.SessionID+"/"+strconv.FormatInt(d.Seq, 10), doc); err != nil {
				idx.Close()
				return nil, 0, fmt.Errorf("raw bleve: %w", err)
			}
			if b.Size() >= 1000 {
				if err := idx.Batch(b); err != nil {
					idx.Close()
					return nil, 0, fmt.Errorf("raw bleve: %w", err)
				}
				b.Reset()
			}
		}
	}
	if err := idx.Batch(b); err != nil {
		idx.Close()
		return nil, 0, fmt.Errorf("raw bleve: %w", err)
	}
	return idx, time.Since(start), nil
}

func bleveSearch(idx bleve.Index, phrase, sessionID string) error {
	pq := bleve.NewMatchPhraseQuery(phrase)
	pq.SetField("text")
	var q query.Query = pq
	if sessionID != "" {
		sq := bleve.NewMatchPhraseQuery(sessionID)
		sq.SetField("sessionId")
		q = bleve.NewConjunctionQuery(pq, sq)
	}
	req := bleve.NewSearchRequestOptions(q, 21, 0, false)
	_, err := idx.Search(req)
	return err
}

// op is one measured operation on dshq and on its references; the three
// functions get the same sample index, so they run the same queries.
type op struct {
	name      string
	section   int
	dshq      func(i int) error
	bleveName string
	bleve     func(i int) error
	ftsName   string
	fts       func(i int) error
}

func (r *runner) searchAndRead(ctx context.Context, fts *FTS, idx bleve.Index, sessions []FTSSession) error {
	n := r.cfg.Samples
	sess := make([]FTSSession, n) // the session of sample i
	rare := make([]string, n)
	common := make([]string, n)
	seqs := make([]int64, n)
	for i := range n {
		k := r.rng.IntN(len(r.corpus.Sessions))
		rare[i] = r.corpus.Rare[k]
		common[i] = r.corpus.Common[r.rng.IntN(len(r.corpus.Common))]
		sess[i] = sessions[r.rng.IntN(len(sessions))]
		seqs[i] = int64(r.rng.IntN(max(1, len(sess[i].Events))))
	}
	const bleveRef, ftsRef = "raw Bleve phrase top-20 (no grouping)", "SQLite FTS5 (original design)"
	ops := []op{
		{name: "sessions.search rare phrase", section: sectionSearch,
			dshq: func(i int) error {
				_, err := r.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: rare[i]})
				return err
			},
			bleveName: bleveRef, bleve: func(i int) error { return bleveSearch(idx, rare[i], "") },
			ftsName: ftsRef, fts: func(i int) error { _, err := fts.SearchSessions(ctx, rare[i], 20, 0); return err }},
		{name: "sessions.search common phrase", section: sectionSearch,
			dshq: func(i int) error {
				_, err := r.client.SearchSessions(ctx, dshq.SessionSearchRequest{Query: common[i]})
				return err
			},
			bleveName: bleveRef, bleve: func(i int) error { return bleveSearch(idx, common[i], "") },
			ftsName: ftsRef, fts: func(i int) error { _, err := fts.SearchSessions(ctx, common[i], 20, 0); return err }},
		{name: "events.search common phrase", section: sectionSearch,
			dshq: func(i int) error {
				_, err := r.client.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: sess[i].Header.ID, Query: common[i]})
				return err
			},
			bleveName: "raw Bleve phrase AND session", bleve: func(i int) error { return bleveSearch(idx, common[i], sess[i].Header.ID) },
			ftsName: ftsRef, fts: func(i int) error {
				_, err := fts.SearchEvents(ctx, sess[i].Header.ID, common[i], 20, 0)
				return err
			}},
		{name: "events.read ±5", section: sectionRead,
			dshq: func(i int) error {
				_, err := r.client.ReadEvent(ctx, dshq.EventReadRequest{SessionID: sess[i].Header.ID, Seq: seqs[i], Before: 5, After: 5})
				return err
			},
			ftsName: "SQLite read of the same window", fts: func(i int) error {
				_, err := fts.ReadWindow(ctx, sess[i].Header.ID, seqs[i], 5, 5)
				return err
			}},
		{name: "sessions.trace", section: sectionRead,
			dshq: func(i int) error {
				_, err := r.client.TraceSession(ctx, dshq.SessionTraceRequest{SessionID: sess[i].Header.ID})
				return err
			},
			ftsName: "SQLite lineage walk", fts: func(i int) error { _, err := fts.Trace(ctx, sess[i].Header.ID); return err }},
	}
	for _, o := range ops {
		r.rep.section = o.section
		r.progress("latency: %s, %d samples each", o.name, n)
		got, err := timeN(n, o.dshq)
		if err != nil {
			return fmt.Errorf("%s: %w", o.name, err)
		}
		if o.bleve != nil {
			want, err := timeN(n, o.bleve)
			if err != nil {
				return fmt.Errorf("%s (raw bleve): %w", o.name, err)
			}
			r.rep.addLatency(o.name, got, o.bleveName, want)
		}
		want, err := timeN(n, o.fts)
		if err != nil {
			return fmt.Errorf("%s (sqlite): %w", o.name, err)
		}
		r.rep.addLatency(o.name, got, o.ftsName, want)
	}
	return nil
}

// timeN calls fn for i in 0..n-1 and returns each call's duration.
func timeN(n int, fn func(i int) error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if err := fn(i); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}
