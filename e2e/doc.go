// Package e2e holds dshq's end-to-end tests. TestMain builds the real
// binaries once (dshq, cmd/projector, cmd/query, nats-server from our module
// graph, and the harness simulator e2e/internal/harnesssim) and the tests run
// them as processes, stopping every one at the end:
//
//   - TestDeploymentSeparatesTenants: a nats-server with the deployment
//     example (deploy/nats-server.conf) and `dshq serve` joining it as the
//     trusted user; the tenants teamA and teamB write a session each through
//     the harness SDK in tenant mode, in the same cwd, and call the tools as
//     them; the server refuses teamA every way to teamB's replies, logs,
//     sessions, leases and tools and to the trusted APIs, with a
//     permissions violation and nothing received, a forged caller answers as
//     a missing one, and the server logs exactly those violations.
//   - TestConcurrentHarnessesCrashAndRebuild: four harness processes write
//     concurrently (forks, subagents, compactions, tool calls, English and
//     Chinese text, titles) as the tenants teamA and teamB; `dshq serve` is killed
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
//   - TestClusterFailoverLosesNothing: three nats-server processes clustered
//     on loopback with the deployment example's users, `dshq serve
//     --replicas 3` joining them, eight harness writers of its two tenants
//     on 200 sessions and two query loops, while the stream's leader
//     is SIGKILLed twice and gracefully restarted once (lame-duck mode):
//     every log ends byte-identical to what its writer appended, every
//     replica holds the same stream, the projection has all of it, nothing
//     failed, and the longest wait of each failover is within its bound
//     (logged per phase).
//   - TestProjectionReplicas: two projectors of one stream (each its own
//     durable and projection) behind a query service process: a cursor from
//     either continues on the other page for page, and under a load of
//     writes and queries each replica in turn is SIGKILLed and restarted
//     without a request failing (the longest waits logged).
//
// Set DSHQ_E2E_BIN to a directory holding prebuilt dshq, projector, query,
// nats-server and harnesssim binaries to skip the build; set DSHQ_E2E_RACE=1
// to build them with the race detector. The nats-server binary is kept
// between runs in the user's cache directory (dshq-e2e/), named by a hash of
// the Go toolchain, the build flags and every module it is built from.
package e2e
