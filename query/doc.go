// Package query is the wire of dshq's trusted query API
// (docs/protocol.md#3-the-trusted-query-api): the typed Client, the
// stateless NATS micro service dsh-query, and a projection shard's replicas
// as the service asks them (ShardConn). The request types with their strict
// decoding, validation and normalization, the filters, the cursor codec and
// the reply encoding are its pure half, package query/wire, which the
// engine links too. It opens no store: it links neither bbolt, Bleve nor
// nats-server (internal/archtest checks).
//
// A request travels in two hops. The service (Serve) decodes the body strictly,
// validates and normalizes it in the original's order
// (docs/search.md#request-validation-order) and forwards it to the projection
// shard on dsh.proj.<shard>.v1.<endpoint>; the shard (package engine over
// package shardhost's local source, hosted by the projector) runs it and the
// service relays the answer, generation included. Both hops answer failures
// with the micro error headers and the {"error":{code,message}} body. A
// service given an Engine (WithEngine) answers through it instead: the
// engine of the shard in the same process (`dshq serve`: one NATS round
// trip and one decode fewer), or the engine over the shards of a
// partitioned projection (package shards).
//
// Wiring: cmd/query (any number of replicas) runs Serve; callers use
// NewClient. Both services are hosted by internal/microhost (ServeEndpoints):
// each request is answered on its own goroutine (at most 256 at a time per
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
//   - Ids compare by the byte order of their UTF-8
//     (docs/protocol.md#3-the-trusted-query-api).
//   - Search compiles its metadata filters under the original's budgets: at
//     most 14 predicates (13 event predicates in events.search) and 32 766
//     bound values, of which 3 (sessions.search: query, limit, offset) or 4
//     (events.search: plus the session id) are the fixed bindings
//     (CheckSearchBudget).
//   - A cursor binds the canonical request (reordered filters or values, or
//     an omitted default limit, give the same cursor), the first page's
//     generation and projection epoch, and a position; what the position
//     counts is the engine's (package query/wire).
package query
