// Package feed is dshq's live feed (docs/protocol.md#5-live-feed): what the
// projector commits — new sessions, appended events, surface reclassifications,
// title changes, lease changes, quarantined records — published to the
// JetStream stream DSH_FEED for subscribers, who can resume from any generation
// still retained without a gap or a repeat at the hand-off from catch-up to
// live.
//
// # Subjects
//
//	dsh.feed.<workspace>.<token>.<kind>
//
// <workspace> is the session's workspace key
// (docs/protocol.md#1-session-ids-subject-tokens-workspace-keys: 32 lowercase hex
// digits of SHA-256(cwd), or "_" without cwd); <token> its subject token;
// <kind> one of session, event, surface, title, lease, quarantine. So
// dsh.feed.<wk>.> is a workspace, dsh.feed.*.<token>.> a session, and a
// NATS permission on dsh.feed.<wk>.> confines a subscriber to its
// workspace. A refused record that belongs to no known session (its subject
// has no valid header record, or is no session subject) goes to
// dsh.feed._q.<token>.quarantine, where <token> is the log subject's token
// when valid and "!" otherwise: "_q" is no workspace key, so only operators
// who subscribe to dsh.feed._q.> see records that may be hostile. A refused
// event of a valid session goes to that session's workspace.
//
// # Messages
//
// Every message is one JSON object (version 1) with the headers
// Dsh-Generation, Dsh-Kind, Dsh-Commit ("<index>/<count>" within its
// commit) and Dsh-Feed-Version:
//
//	{"v":1, "kind":K, "generation":G, "workspace":W, "token":T,
//	 "sessionId":ID,   // absent only for a _q quarantine of no known session
//	 "epoch":E,        // the projection's epoch; a change means it was rebuilt
//	 K: body}
//
// with one body, named by the kind:
//
//	session     {"header":{version:2,id,createdAt,cwd?,parentSession?,isSeeded,
//	             origin?,delegationDepth?,agentPreset?},"live","persisted",
//	             "inheritedEventCount"}
//	event       {"sessionId","seq","type","time","surface","text"?,
//	             "textTruncated"?,"invalid"?,"raw"?,"rawBytes","rawOmitted"?}
//	surface     {"seq","from"?,"to","replacedBy"?}   to: current|shadowed|log-only|invalid
//	title       {"title","messageSeqs","source","eventSeq","updatedAt"}
//	lease       {"live"}
//	quarantine  {"streamSeq","subject","reason","excerpt","rawBytes","rawTruncated"?}
//
// "raw" is the event exactly as written; it is left out (rawOmitted) when
// the message would exceed the size limit or the record is not JSON, and
// the text is then cut (textTruncated) if still needed. A quarantine
// message never carries a refused record: "excerpt" is its first
// MaxExcerptBytes bytes as valid UTF-8.
//
// # Generations, retention and resume
//
// A message's generation is the generation of the commit that produced it
// (the session stream sequence the projection reached). Generations never
// decrease along the feed. A lease-only commit keeps the generation of the
// commit before it and follows it; so the feed is ordered by
// key = 2·generation (+1 for lease messages).
//
// The stream keeps messages for StreamConfig.MaxAge and MaxBytes (and
// MaxMsgs). AfterGeneration(g) delivers every message with key > 2g — the
// messages of later commits and the lease messages observed at g, which a
// reader of generation g may or may not have seen (a lease is a state;
// seeing it twice is harmless) — in feed order, then live ones, through one
// ordered consumer that starts at the first such message (found by binary
// search with throwaway filtered consumers), so nothing is dropped or
// repeated at the hand-off. AfterPosition(p) resumes exactly after the
// delivered message whose Position is p (and Pending says how many
// matching messages were still to come when it was delivered: a subscriber
// with Pending > 0 is behind). Live() starts at the next
// message, Oldest() at the oldest retained one. A start point whose
// messages may have aged out fails with *NotRetainedError (ErrNotRetained)
// naming the oldest resumable generation and position, unless OrOldest is
// set. A confined subscriber cannot see outside its filter, so the check is
// conservative: it passes only when the first retained message of the
// filter is not later than the start point.
//
// # Publishing
//
// The projector publishes each commit with Publisher.Publish, or hands it
// to a Queue that publishes in the background in order, retrying through
// outages (in commit order, from its commit hook);
// feed/feedcommit.FromCommit turns a projection.Commit into its messages.
// Each message of a commit that is not lease-only carries a Nats-Msg-Id
// derived from the change it reports (MsgID), so a commit published again
// within the duplicate window is stored once, in whatever order it was
// re-derived; a retry, and Resume (the completion of a commit a crash left
// half published), publish only the messages the feed's tail does not hold.
// The projector's rule — publish a commit as it is only when it continues
// what the feed holds, re-derive what the feed lacks otherwise, never
// publish again what it holds — is feed/feedcommit.Feeder, which reads
// Publisher.Checkpoint on start.
//
// # Permissions
//
// A subscriber confined to workspace W on stream DSH_FEED needs exactly:
//
//	publish:   $JS.API.CONSUMER.CREATE.DSH_FEED.*.dsh.feed.W.>
//	           $JS.API.CONSUMER.MSG.NEXT.DSH_FEED.*
//	           $JS.API.CONSUMER.DELETE.DSH_FEED.*
//	subscribe: <its inbox prefix>.>   (nats.CustomInboxPrefix)
//
// Tail never reads the stream directly (no STREAM.INFO, no direct get: they
// would reveal other workspaces). A refused request is not answered by
// NATS: Tail fails when its context ends, and the connection's error
// handler receives the permissions violation.
package feed
