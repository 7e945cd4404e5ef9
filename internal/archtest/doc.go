// Package archtest holds the test of dshq's import rules, read from
// `go list -deps` for every system the binaries are built for (linux,
// darwin, windows), each rule by name: the harness SDK (bus), the query
// API's wire (query), the shards source, the tools, the MCP server and the
// query service's command link no store and no server (bbolt, Bleve,
// nats-server); the query engine and the wire format (engine, query/wire)
// link no bbolt, Bleve or NATS; the vocabulary (the root package) and the
// pure cores (fold, authz) link nothing but the standard library and the
// root; the pure packages import no package with an I/O capability (os,
// net, log, syscall, io/fs, path/filepath… and everything below them); the
// harness converters (capture/...) link no NATS and, of ours, only the
// vocabulary, fold and record; no command links the testing package or a
// test helper; only the process wiring and the test stack link the embedded
// server, directly or through another package; and the layers (the
// vocabulary, the pure cores, the stores and the bus, the projector and the
// sources, the services, the node, the commands) import only down. A broken
// rule fails with the import chain that breaks it; TestCheck_NamesTheChain
// plants a violation of each rule and checks that it is found.
package archtest
