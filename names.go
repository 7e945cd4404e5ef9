package dshq

// The protocol's names (docs/protocol.md), each defined here once: the
// streams, subjects and buckets on JetStream, and the NATS micro services with
// their subject prefixes.
const (
	// SessionStream is the session log stream: the only source of truth.
	SessionStream = "DSH_SESSIONS"
	// LogSubjectPrefix prefixes every session subject: dsh.log.<token>.
	LogSubjectPrefix = "dsh.log."
	// LogSubjects is the session stream's subject filter.
	LogSubjects = "dsh.log.>"
	// LeaseBucket is the key-value bucket of harness write leases.
	LeaseBucket = "DSH_LEASES"
	// ProjectorDurable is the projector's durable consumer of SessionStream.
	ProjectorDurable = "dsh-projector"

	// CursorBucket is the key-value bucket of stored search hits, from which
	// any replica continues a search cursor.
	CursorBucket = "DSH_CURSORS"
	// SpillBucket is the object store of tool results too large for a reply.
	SpillBucket = "DSH_SPILL"
	// KeyBucket is the key-value bucket of the deployment's keys (file
	// storage, no expiry); CursorKeyName is the key that authenticates
	// query cursors, created at random by the first projector to start.
	KeyBucket     = "DSH_KEYS"
	CursorKeyName = "cursor-hmac-sha256"

	// FeedStream is the live feed stream of the projector's commits.
	FeedStream = "DSH_FEED"
	// FeedSubjectPrefix prefixes every feed subject:
	// dsh.feed.<workspace>.<token>.<kind>.
	FeedSubjectPrefix = "dsh.feed."
	// FeedSubjects is the feed stream's subject filter.
	FeedSubjects = "dsh.feed.>"
)

// The NATS micro services.
const (
	// ServiceVersion is the version every dshq service announces (the v1 of
	// its subjects).
	ServiceVersion = "1.0.0"
	// ServiceQueueGroup is the queue group of dsh-query, dsh-tools and
	// dsh-admin, so that replicas share the load.
	ServiceQueueGroup = "q"

	// QueryService is the trusted query API's service name; its endpoints are
	// QuerySubjectPrefix.<endpoint>.
	QueryService       = "dsh-query"
	QuerySubjectPrefix = "dsh.query.v1"

	// ShardService is the projection side of the query API, hosted by the
	// projector on ShardSubject(shard, endpoint).
	ShardService = "dsh-projection"
	// DefaultShard is the shard token of a projection that is not
	// partitioned (ShardToken).
	DefaultShard = "0"

	// ToolsService is the model-facing tools' service name; its endpoints are
	// ToolsSubjectPrefix.<tool>.
	ToolsService       = "dsh-tools"
	ToolsSubjectPrefix = "dsh.tools.v1"

	// AdminService is the operator API's service name; its endpoints are
	// AdminSubjectPrefix.<endpoint>.
	AdminService       = "dsh-admin"
	AdminSubjectPrefix = "dsh.admin.v1"

	// MovedEndpoint is the pseudo-endpoint on which an instance of
	// dsh-query or of a projection shard announces itself (an empty
	// message on <prefix>.moved) when it connects and after every
	// reconnect: a request in flight to it when its connection dropped was
	// lost, and a client waiting for a reply sends it again.
	MovedEndpoint = "moved"
)

// ShardSubjectPrefix returns the subject prefix of projection shard shard:
// dsh.proj.<shard>.v1.
func ShardSubjectPrefix(shard string) string { return "dsh.proj." + shard + ".v1" }

// ShardSubject returns the subject of endpoint on projection shard shard:
// dsh.proj.<shard>.v1.<endpoint>.
func ShardSubject(shard, endpoint string) string { return ShardSubjectPrefix(shard) + "." + endpoint }

// ShardReplicaSubject returns the subject of endpoint on one replica of
// projection shard shard, the projector whose durable consumer is replica:
// dsh.proj.<shard>.v1.replica.<replica>.<endpoint>.
func ShardReplicaSubject(shard, replica, endpoint string) string {
	return ShardSubjectPrefix(shard) + ".replica." + replica + "." + endpoint
}

// ShardStatusSubject returns the subject on which every replica of
// projection shard shard announces its generation: dsh.proj.<shard>.v1.status.
func ShardStatusSubject(shard string) string { return ShardSubjectPrefix(shard) + ".status" }

// ShardQueueGroup returns the queue group of projection shard shard's
// replicas: p<shard>.
func ShardQueueGroup(shard string) string { return "p" + shard }

// ShardDurable returns the default durable consumer of shard shard of a
// projection partitioned into shards: dsh-projector-<shard>of<shards>
// (dsh-projector for the whole stream).
func ShardDurable(shard, shards int) string {
	if shards < 2 {
		return ProjectorDurable
	}
	return ProjectorDurable + "-" + ShardToken(shard, shards)
}
