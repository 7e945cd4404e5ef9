// Package engine is the one query engine of the trusted query API
// (docs/protocol.md#3-the-trusted-query-api): the Engine that answers
// normalized wire.Requests (reads, surfaces, lineage, event traces, search,
// paging) against an engine.Source, and the in-memory cursor store. It is
// pure: it links no projection, no index and no NATS (internal/archtest
// checks), and every rule of the API is written here once. Its sources are
// a projector's (shardhost.Local, served as a projection shard by
// shardhost.ServeShard) and a partitioned projection's shards over NATS
// (package shards); the query service (package query) answers through an
// Engine with query.WithEngine, which *Engine satisfies.
//
// Decisions the contract leaves open:
//
//   - Search paging is answered as of the first page: a first page with
//     more than one page of hits ranks up to MaxSearchResults (10 000) hits
//     and stores the rest, in chunks of at most 256 KiB, in a CursorStore
//     (the JetStream KV bucket DSH_CURSORS, TTL CursorTTL); later pages read
//     them back. The first page ranks keys only and stores (session id, seq, availability); every page
//     served loads its own docs and snippets from the index, so a common
//     word costs one ranking pass rather than 10 000 snippets. A search that
//     matches more pages through the first 10 000; the cursor of the page
//     that reaches them then fails with SESSION_QUERY_REPLY_TOO_LARGE,
//     saying the result set is too large to page, rather than ending
//     silently. List-shaped endpoints page by key on their immutable order
//     and count only what existed at the first page's generation.
//   - A cursor is stale (SESSION_QUERY_STALE_CURSOR) when the projection
//     answering it is of another lineage (another stream, or another
//     projection version: Snapshot.Lineage), when a session it counted was
//     reclassified after its first page, or when its stored results expired.
//     Every replica of one stream, and a rebuild of it, has the same lineage:
//     a cursor continues on any of them.
package engine
