// Package e2e holds dshq's end-to-end tests. They build the real binaries
// once (dshq, nats-server from our module graph, and the harness simulator
// e2e/internal/harnesssim) and run them as processes: a nats-server with the
// deployment example's configuration (deploy/nats-server.conf), `dshq serve`
// against it or with its embedded server, and concurrent harness processes
// writing through the harness SDK. The tests check searches, traces, reads
// and tool calls against what the harnesses report they wrote, kill the
// projector mid-stream and compare its recovered projection with a rebuild
// made while queries keep running.
//
// Set DSHQ_E2E_BIN to a directory holding prebuilt dshq, projector, query,
// nats-server and harnesssim binaries to skip the build.
package e2e
