// Package e2e holds dshq's end-to-end tests. TestMain builds the real
// binaries once (dshq, cmd/projector, cmd/query, nats-server from our module
// graph, and the harness simulator e2e/internal/harnesssim) and the tests run
// them as processes, stopping every one at the end:
//
//   - TestDeploymentSeparatesHarnessFromTrustedAPI: a nats-server with the
//     deployment example (deploy/nats-server.conf) and `dshq serve` joining
//     it as the trusted user; the harness credential writes a session through
//     the harness SDK and calls a tool, and the server refuses it the trusted
//     query API, the shard subjects, the admin API and other inboxes.
//   - TestConcurrentHarnessesCrashAndRebuild: four harness processes write
//     concurrently (forks, subagents, compactions, tool calls, English and
//     Chinese text, titles) as the harness user; `dshq serve` is killed
//     (SIGKILL) mid-stream and restarted; searches, reads, traces, titles,
//     tool calls and the CLI are checked against the facts the harnesses
//     report; a rebuild runs while queries keep being answered, and the
//     rebuilt projection answers exactly as the recovered one.
//   - TestProjectorAndQueryAsSeparateProcesses: cmd/projector and cmd/query
//     as separate processes; the projector is killed mid-stream, the query
//     service answers a typed error meanwhile, and the recovered projection
//     equals one built from scratch.
//   - TestServeAllInOne: `dshq serve` with its embedded server, a harness,
//     a clean SIGTERM and a restart on the same home.
//   - TestCrashedHarnessReadsBalancedUntilResumed: a harness killed mid-turn
//     reads balanced (synthetic closers) once its lease lapses, and resuming
//     writes exactly that view.
//
// Set DSHQ_E2E_BIN to a directory holding prebuilt dshq, projector, query,
// nats-server and harnesssim binaries to skip the build; set DSHQ_E2E_RACE=1
// to build them with the race detector.
package e2e
