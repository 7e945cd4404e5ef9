// Package bus is dshq's NATS layer: provisioning of the session log stream and
// the write-lease bucket, an embedded nats-server for laptops and tests, and
// the harness SDK — the persistence seam of UPSTREAM §8.1 on JetStream (Store
// and Handle).
//
// The stream is the only source of truth. Every session's records live on the
// subject dsh.log.<token> (CONTRACT §2): the header record first, then one
// event per record with seq contiguous from 0. Every record is published with
// Nats-Msg-Id <token>:h or <token>:<seq> and
// Nats-Expected-Last-Subject-Sequence, so a retried publish is never stored
// twice and two writers can never interleave one session. Single-writer
// ownership is a lease in a JetStream key-value bucket, kept alive by a
// heartbeat goroutine owned by the handle and stopped by Close.
package bus
