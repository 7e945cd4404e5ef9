// Package tenancy holds the names and the NATS permissions of a dshq tenant
// (docs/protocol.md#2-the-session-log-stream,
// docs/protocol.md#4-the-model-facing-tools; README, "Deploying on a NATS
// server").
//
// A tenant — a harness, or a team of them — is a NATS user whose
// permissions the server enforces. It writes its sessions on
// dsh.log.<tenant>.<token> with msg ids <tenant>.<token>:h and
// <tenant>.<token>:<seq>, holds its write leases under the keys
// <tenant>.<token> of DSH_LEASES, reads its own logs back through the subject
// form of direct get and through push consumers whose filter is inside
// dsh.log.<tenant>.>, receives only on its inbox prefix _INBOX_<tenant>, and
// calls the tools on dsh.tools.v1.tenant.<tenant>.<tool>, where the caller
// it names must be one of its own sessions. Permissions returns that set
// for one tenant, generated from one template, so an operator never writes
// the subjects by hand (dshq tenant permissions <name>).
package tenancy
