// Package query is the trusted query API of dshq (CONTRACT §3): the
// stateless NATS micro service dsh-query, the projection-side Engine that
// answers normalized requests against a projection snapshot, and a typed
// Client.
//
// A request travels in two hops. The service (Serve) decodes the body
// strictly, validates and normalizes it in the original's order (UPSTREAM
// §5.5) and forwards the normalized Request to the projection shard on
// dsh.proj.<shard>.v1.<endpoint>; the shard (ServeShard, hosted by the
// projector) runs it on its Engine and the service relays the answer,
// generation included. Both hops answer failures with the micro error
// headers and the {"error":{code,message}} body. A service in the same
// process as its shard's engine (WithLocalShard; `dshq serve`) calls the
// engine directly instead of the second hop: the same answers, one NATS
// round trip and one decode fewer.
//
// Wiring: a projector process builds its Engine with NewShardEngine (or
// NewEngine with FromProjector, FromIndex and a CursorStore) and serves it
// with ServeShard; cmd/query (any number of replicas) runs Serve; callers
// use NewClient. Both services are hosted by internal/microhost: each
// request is answered on its own goroutine (at most 256 at a time per
// instance), so a long minGeneration wait never blocks other requests, and
// `nats micro info|stats` count the answers themselves (requests, errors,
// processing time from arrival to reply), with the errors by code in each
// endpoint's data.
//
// Decisions the contract leaves open:
//
//   - Unknown request fields are refused with SESSION_QUERY_INVALID_REQUEST
//     (naming the field), after the body's shape and before any field check.
//     Unknown keys inside a filter clause are SESSION_QUERY_INVALID_FILTER.
//   - Ids compare by the byte order of their UTF-8 (CONTRACT §3).
//   - Search compiles its metadata filters under the original's budgets: at
//     most 14 predicates (13 event predicates in events.search) and 32 766
//     bound values, of which 3 (sessions.search: query, limit, offset) or 4
//     (events.search: plus the session id) are the fixed bindings.
//   - Search paging is answered as of the first page: a first page with
//     more than one page of hits ranks up to MaxSearchResults (10 000) hits
//     and stores the rest, in chunks of at most 256 KiB, in a CursorStore
//     (the JetStream KV bucket DSH_CURSORS, TTL CursorTTL); later pages read
//     them back. With a KeySearcher (FromIndex, FromIndexFunc) the first page
//     ranks keys only and stores (session id, seq, availability); every page
//     served loads its own docs and snippets from the index, so a common word
//     costs one ranking pass rather than 10 000 snippets. A search that matches more pages through the first 10 000;
//     the cursor of the page that reaches them then fails with
//     SESSION_QUERY_REPLY_TOO_LARGE, saying the result set is too large to
//     page, rather than ending silently. List-shaped endpoints page by key on their immutable order and
//     count only what existed at the first page's generation.
//   - A cursor is stale (SESSION_QUERY_STALE_CURSOR) when the projection
//     epoch changed (a rebuild was swapped in), when a session it counted was
//     reclassified after its first page, or when its stored results expired.
package query
