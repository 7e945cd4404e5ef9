// Package bench is dshq's end-to-end benchmark, run by `make bench` through
// cmd/dshq-bench. It generates one realistic corpus (GenerateCorpus: turns
// with tool calls and results, titles, compactions that replace the whole
// surface, English and Chinese text, forks and subagents), drives it
// through the real pipeline — an embedded NATS server with JetStream
// (sync_interval always), the harness SDK's appends (bus.Store) from
// concurrent writers, the projector (projection.Open and Run, bbolt and
// Bleve), the query service over NATS (query.Serve, engine.ServeShard,
// query.Client) — and prints one table in which every figure stands beside
// a reference measured in the same run, on the same machine, with the ratio.
//
// The references:
//
//   - raw JetStream: the corpus's records published with pipelined async
//     publishes to a stream with the session stream's configuration; a
//     pull-and-ack consumer doing no work; publish→delivery through an
//     ordered consumer; single and pipelined publishes of the append batch
//     sizes on the same server (sync always, and a second server with the
//     relaxed sync policy).
//   - raw Bleve: the projection's own search documents, read back from it,
//     in a new on-disk index with the default mapping, queried in process
//     with a phrase query (top 21, no grouping by session, no snippets).
//   - SQLite FTS5 (FTS, modernc.org/sqlite): the original design's search
//     (docs/search.md#ranking: unicode61, one literal phrase, match-count ranking
//     from highlight(), best document per session, metadata predicates
//     before ranking, snippets) over the same documents, plus the raw logs
//     and the sessions table for event windows and lineage. Event traces
//     and surface reads load the session's log and fold it (fold.Strict),
//     as the original's readers do. It leaves out the original's
//     reconciliation before every search, and walks lineage through an
//     index on parent_session instead of listing every session, so it is
//     faster than the original was.
//
// A corpus larger than Config.SampleSessions (the query figures of the
// issues need a million events) is written in two phases, and the table's
// head says which setting each used. The bulk — every session but the last
// SampleSessions — is loaded first, unmeasured, through Store.Import (record
// by record, Config.BulkWriters concurrent importers) on the embedded server
// with the relaxed sync policy and no projector; the server then restarts
// with sync always on the same store. The projector starts on that backlog
// and its catch-up is the projector-apply figure at scale, beside a raw
// pull-and-ack of the same records and raw Bleve on the same documents. The
// last SampleSessions sessions are the measured ingest, as before: bus.Store
// appends with sync always and Config.Writers writers, projector running.
// Without a bulk, a fresh projector applies the whole stream instead.
//
// Memory is reported as the process's RSS high-water mark and the Go heap
// peak during ingest, beside the same figures just before ingest (the
// server, the projector and the corpus are in the same process).
//
// Last, the dshq serve phase measures what a client of the all-in-one
// process sees (measureServe; -serve=false leaves it out, -serve-only runs it
// alone): a `dshq serve` child process (built with go build, or -dshq) on a
// fresh home, over TCP. The whole corpus is published into it with the
// contract's headers (Nats-Msg-Id, Nats-Expected-Last-Subject-Sequence
// chaining each session), 256 sessions at once with one publish in flight
// each, beside the same client publishing the corpus's first sessions (at
// most 200,000 records) to a raw stream of the same server while dshq is
// idle. One query follows the generation dshq answers at (asking each time
// for one past the last it saw, so that each commit answers it), which
// gives when every sampled record of the load became searchable; a record's
// publish→ack is its reference. Then single appends through the harness SDK
// on the quiet server, each until a query at its generation answers, beside
// raw publish→delivery on the same server; Config.Samples calls of every
// search class, events.read and a usage report through a query client; the
// process's peak RSS (VmHWM) over all of that beside its RSS when it was
// ready, and the peaks of its two parts sampled every 100 ms from its start
// until the last query (RssAnon: its own memory, the Go heap and the
// embedded server's caches; RssFile: the pages of the files it maps,
// bbolt's and Bleve's, which the kernel reclaims under pressure); and, once
// it stopped, its home's size on disk by part beside the session stream
// (and the stream beside the records' own bytes, and Bleve beside the
// SQLite baseline's database).
//
// Before the query latencies the bench releases its read-back copies of
// the events and documents (the references hold their own), so that all
// three implementations run on a heap nearer a user's process, and waits
// until neither Bleve index has background work (the raw reference index
// is built just before; Config.NoSettle, -settle=false, measures at once).
//
// The search classes are timed over Config.SearchSamples requests (1,000 by
// default: a p99 over a few hundred swings by 3× for one binary), the other
// latencies over Config.Samples; each row names its count. Rows that issue
// 28 sets a bound on carry a Target (a bound on the value or on the ratio,
// at 100k events or at 1M, whichever is nearer the corpus), and the table
// ends with them, each met or missed.
//
// Each search class ends with a tail note (Report.Tails, printed after the
// targets; -tails=false leaves it out): what overlapped the slowest 1% of
// dshq's samples, beside the share of all samples it overlapped — a GC
// cycle of the bench process (and its stop-the-world pauses), a merge or
// persist of the projection's Bleve index or of the raw reference index, a
// projector commit, page faults, the process's CPU and the machine's CPU
// pressure during the sample — and the reference's latency on the same
// samples, which run back to back. Two probes bracket each dshq sample,
// outside its timing (runtime/metrics, getrusage, /proc/pressure/cpu and
// Bleve's expvar of its indexes' counters). -search-trace FILE writes an
// execution trace of the search classes (-search-trace-class limits it),
// each dshq sample a region named after its class.
//
// A run fails rather than print a meaningless figure: a generated record
// the projector quarantines, a search that finds nothing, or a rare-phrase
// search on which dshq and the baseline disagree is an error.
package bench
