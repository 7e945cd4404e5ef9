// Package engine is the projection side of the trusted query API
// (docs/protocol.md#3-the-trusted-query-api): the Engine that answers
// normalized query.Requests against a projection snapshot (reads, surfaces,
// lineage, event traces, search and key search, paging), the cursor stores, the
// adapters from the projector (package projection) and its index (package
// index) to the Engine's interfaces, and the shard service dsh-projection on
// dsh.proj.<shard>.v1.<endpoint> (ServeShard). The projector process hosts it;
// the query service (package query) reaches it over NATS, or in the same
// process through query.WithLocalShard, which *Engine satisfies.
//
// Wiring: a projector process builds its Engine with NewShardEngine (or New
// with FromProjector, FromIndexFunc and a CursorStore) and serves it with
// ServeShard.
//
// Decisions the contract leaves open:
//
//   - Search paging is answered as of the first page: a first page with
//     more than one page of hits ranks up to MaxSearchResults (10 000) hits
//     and stores the rest, in chunks of at most 256 KiB, in a CursorStore
//     (the JetStream KV bucket DSH_CURSORS, TTL CursorTTL); later pages read
//     them back. With a KeySearcher (FromIndex, FromIndexFunc) the first page
//     ranks keys only and stores (session id, seq, availability); every page
//     served loads its own docs and snippets from the index, so a common
//     word costs one ranking pass rather than 10 000 snippets. A search that
//     matches more pages through the first 10 000; the cursor of the page
//     that reaches them then fails with SESSION_QUERY_REPLY_TOO_LARGE,
//     saying the result set is too large to page, rather than ending
//     silently. List-shaped endpoints page by key on their immutable order
//     and count only what existed at the first page's generation.
//   - A cursor is stale (SESSION_QUERY_STALE_CURSOR) when the projection
//     answering it is of another lineage (another stream, or another
//     projection version: Snapshot.Epoch), when a session it counted was
//     reclassified after its first page, or when its stored results expired.
//     Every replica of one stream, and a rebuild of it, has the same lineage:
//     a cursor continues on any of them.
package engine
