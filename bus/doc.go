// Package bus is dshq's NATS layer: provisioning of the session log stream and
// the write-lease bucket, and the harness SDK — the persistence seam of
// docs/sdk.md#the-persistence-seam on JetStream (Store and Handle). It links no
// nats-server: the
// embedded server is package embedded.
//
// # Records
//
// The stream is the only source of truth. Every session's records live on the
// subject dsh.log.<token> (docs/protocol.md#2-the-session-log-stream): the
// header record first, then one
// event per record with seq contiguous from 0. Every record is published with
// Nats-Msg-Id <token>:h or <token>:<seq>, so a retried publish is never
// stored twice within the stream's duplicate window.
//
// # Tenants
//
// A tenant's Store (WithTenant) keeps its sessions on
// dsh.log.<tenant>.<token>, with msg ids <tenant>.<token>:h and
// <tenant>.<token>:<seq> and leases under <tenant>.<token>, and works within
// the NATS permissions a tenant gets (package tenancy,
// docs/protocol.md#2-the-session-log-stream):
// it provisions and inspects nothing, reads the last record of a subject by
// the subject form of direct get and everything else through push consumers
// on its own subjects delivering to its own inbox, and writes and reads its
// leases without the key-value client (which needs the bucket's info). Every
// other behaviour below is the same in both namespaces. A duplicate
// acknowledgement that the session's own records do not confirm is
// ErrMsgIDInUse: another writer holds the msg id (deduplication is
// stream-wide), nothing was stored.
//
// # Publishing an Append
//
// An Append of fewer than DefaultAtomicMin records (WithAtomicMin) is
// published record by record, each with Nats-Expected-Last-Subject-Sequence
// set to the exact stream sequence of the session's previous record (0 for the
// header), as docs/protocol.md#2-the-session-log-stream says. A larger Append
// is published as atomic batches
// (nats-server 2.12+; the stream has allow_atomic): nats.go v1.55 has no
// client helper, so the SDK sets Nats-Batch-Id, Nats-Batch-Sequence and
// Nats-Batch-Commit itself, sends the staged records without a reply and the
// commit as a request. Inside a batch only the first record can carry the
// expected sequence — the server refuses it on a subject already written in
// the same batch — and the batch commits all-or-nothing in isolation, so the
// guarantee is the same: no record of another writer can land in between.
// Atomic batches cost the server a staging store (tens of milliseconds), so
// they only pay off for large appends, where one fsync covers the whole batch
// (BenchmarkAppend measures both modes). A record-by-record Append that fails
// half way leaves a valid prefix stored and the handle positioned after it.
//
// # Retries
//
// Transient failures (timeouts, no responders, a server restarting, leader
// changes, a batch cut short by a reconnect) are retried with exponential
// backoff (github.com/cenkalti/backoff/v4), bounded by WithRetryMaxElapsed.
// A retry whose first attempt may have been stored meets either a duplicate
// acknowledgement or a wrong-last-sequence refusal; the publisher then checks
// whether the subject ends with exactly its records (same msg ids, same
// bytes, right after the expected predecessor) and, if so, takes them as
// stored. When retries run out the outcome is unknown; the handle settles it
// at its next write by reading the subject's last record. Anything else at
// that position was written by someone else: ErrOwnershipLost.
//
// # Ownership
//
// Single-writer ownership is a lease in a JetStream key-value bucket
// (dshq.LeaseBucket), one key per session (LeaseKey of its subject token).
// The bucket's max age is the lease TTL and each write handle's heartbeat
// goroutine rewrites its key every TTL/3; a crashed writer's key ages out
// and the bucket leaves a limit marker, so a watcher sees the lapse. The
// heartbeat is owned by the handle and stopped by Close, which deletes the
// key if it is still ours. A writer that stalls past its TTL re-takes the
// lease on its next write if nobody else did, and otherwise fails with
// ErrOwnershipLost; the expected-sequence guard makes an interleaving
// impossible even then.
//
// # Importing a log
//
// Store.Import publishes a log written elsewhere (an upstream JSONL file,
// another deployment's export) through the same publisher as Append — the
// same msg ids, expected-sequence chaining, atomic-batch threshold, retries
// and settlement — but validates it with the lenient fold the projector
// reads with, not the strict one Append enforces: strict in what harnesses
// write, liberal in what a shared corpus reads
// (docs/events-and-surfaces.md#strict-and-lenient-validation). It holds the
// session's write lease while it works, so it never races a harness, and it
// is idempotent: a log stored already is present, a stored prefix is
// continued, anything else is ErrLogConflict. An import whose retries ran
// out is settled by importing the same log again. Store.Records reads a
// session's records back exactly as stored (dshq export).
//
// # Contract choices
//
// Stat of an unknown id returns (nil, nil), as upstream's undefined. A
// session created in a Store is visible to that Store (Stat, List, Open read)
// at once and to others after its first Append or Flush. Revision is the
// stream sequence of the session's last record and EventCount comes from the
// stream's per-subject message count. List skips subjects whose token or
// header record is invalid (they hold no session:
// docs/events-and-surfaces.md#invalid-records-and-quarantine). Durability
// of an acknowledged record is the server's: with sync always (the embedded
// default) it is on disk; Flush materialises and waits for nothing else.
package bus
