// Package archtest holds the test of dshq's import rules, read from
// `go list -deps`: the harness SDK (bus), the query API's wire (query), the
// tools, the MCP server and the query service's command link no store and no
// server (bbolt, Bleve, nats-server); the vocabulary (the root package) and
// the pure cores (fold, authz) link nothing but the standard library and the
// root, and import no I/O package themselves; the harness converters
// (capture/...) link no NATS and, of ours, only the vocabulary, fold and
// record; and only the process wiring and the test stack import the embedded
// server. A broken rule fails with the import chain that breaks it.
package archtest
