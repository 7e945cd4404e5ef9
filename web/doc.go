// Package web is dshq's web UI: a trusted client of a deployment that shows
// the corpus to people. It reads only through the trusted query API
// (query.Client: sessions.list/filter/search/read/stat/trace/titles,
// events.*) and follows the live feed (feed.Tail, resumed from the page's
// generation), never the stores, so it runs beside the projector in
// `dshq serve` or apart from it in `dshq ui --nats-url …`.
//
// # Pages
//
//	/                      sessions, newest first, filtered by workspace, time,
//	                       availability and harness; paged by cursor; live
//	/search?q=…            sessions.search (or events.search with session=ID),
//	                       snippets with the match highlighted
//	/s/{id}                a session's transcript, one page of PageSize events
//	                       (?page=N, or ?seq=N for the page holding event N,
//	                       anchored #e-N), every event marked current / shadowed
//	                       / log-only, replacements shown where they happened;
//	                       live while the session is written
//	/s/{id}/e/{seq}        an event whole, its replacement chain and its
//	                       provenance both ways
//	/s/{id}/lineage        the session's lineage: ancestors, then its forks and
//	                       subagents as a tree
//
// /s/{id}/live and /live are the pages' Server-Sent Event streams (one feed
// subscription each, resumed exactly after the last message the page saw:
// SSE ids are feed positions), /api/counts the event counts of live
// sessions on the list, /static/ the embedded assets.
//
// # Safety
//
// Every value from a log is untrusted. Pages are html/template output, so
// text is escaped in its context; control characters and bidirectional
// overrides are shown as visible symbols (clean) rather than passed to the
// browser. Every response carries a strict Content-Security-Policy (no
// inline script or style, Trusted Types required for the one HTML sink the
// live script uses) and the usual hardening headers. Without a token the
// UI answers only requests whose Host is a loopback name (a page elsewhere
// cannot reach it by DNS rebinding); Listen refuses a non-loopback address
// without one. With a token, a request must carry it once
// (?token=, or Authorization: Bearer) and then holds an HttpOnly,
// SameSite=Strict cookie derived from it.
//
// The harness filter (deepseek-harness, Claude Code, Codex) reads an
// optional header member "harness"; until the sessions a UI has seen carry
// it, the filter is not offered.
package web
