package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/jsprovision"
	"github.com/dshq/dshq/record"
)

// Stream and bucket defaults (the names are dshq.SessionStream,
// dshq.LogSubjects and dshq.LeaseBucket).
const (
	// DefaultDuplicates is the stream's duplicate window. It bounds how long
	// after a first attempt a retried publish is still recognised by its
	// Nats-Msg-Id: four times DefaultRetryMaxElapsed. The server holds every
	// id of the window in memory (at 3,400 records/s, ten minutes were some
	// 2M ids, the largest part of dshq serve's heap); past the window a
	// retry is still never stored twice (its expected last subject sequence
	// refuses it) and the writer recognises its own record by reading the
	// session's tail.
	DefaultDuplicates = 2 * time.Minute
	// DefaultLeaseTTL is how long a write lease outlives its last heartbeat.
	DefaultLeaseTTL = 15 * time.Second
)

// Subject returns the subject of a session's records, dsh.log.<token>
// (docs/protocol.md#2-the-session-log-stream). An invalid id is refused as by
// record.ValidateSessionID.
func Subject(id string) (string, error) {
	tok, err := record.SubjectToken(id)
	if err != nil {
		return "", err
	}
	return dshq.LogSubjectPrefix + tok, nil
}

// StreamConfig says what EnsureStream provisions. The zero value is the
// default deployment.
type StreamConfig struct {
	// Name is the stream name ("" = dshq.SessionStream).
	Name string
	// Replicas is the stream and bucket replica count (0 = 1).
	Replicas int
	// Duplicates is the duplicate window (0 = DefaultDuplicates).
	Duplicates time.Duration
	// LeaseBucket is the write-lease bucket ("" = dshq.LeaseBucket).
	LeaseBucket string
	// LeaseTTL is the lease lifetime without heartbeat (0 = DefaultLeaseTTL).
	// It is the bucket's max age, so it is fixed when the bucket is created.
	LeaseTTL time.Duration
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.Name == "" {
		c.Name = dshq.SessionStream
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Duplicates == 0 {
		c.Duplicates = DefaultDuplicates
	}
	if c.LeaseBucket == "" {
		c.LeaseBucket = dshq.LeaseBucket
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	return c
}

// jsConfig is the stream configuration dshq needs. The log is the source of
// truth: no limits, no expiry, no deletes or purges; atomic batch publish
// lets one Append land all-or-nothing; direct get serves header and tail
// lookups from any replica.
func (c StreamConfig) jsConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               c.Name,
		Subjects:           []string{dshq.LogSubjects},
		Storage:            jetstream.FileStorage,
		Retention:          jetstream.LimitsPolicy,
		Discard:            jetstream.DiscardOld,
		MaxMsgs:            -1,
		MaxBytes:           -1,
		MaxAge:             0,
		MaxMsgsPerSubject:  -1,
		MaxMsgSize:         -1,
		Replicas:           c.Replicas,
		Duplicates:         c.Duplicates,
		DenyDelete:         true,
		DenyPurge:          true,
		AllowDirect:        true,
		AllowAtomicPublish: true,
	}
}

// EnsureStream creates the session log stream, or verifies an existing one.
// It is idempotent. An existing stream whose configuration conflicts with
// what dshq needs is an *Error of kind ErrStreamConflict naming every
// difference; it is never updated. The lease bucket is ensured as well
// (EnsureLeaseBucket).
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	cfg = cfg.withDefaults()
	want := cfg.jsConfig()
	st, existed, err := jsprovision.CreateOrBind(ctx, js, want)
	if err != nil {
		return nil, fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
	}
	if existed {
		if err := compareStream(want, st.CachedInfo().Config); err != nil {
			return nil, err
		}
	}
	if _, err := EnsureLeaseBucket(ctx, js, cfg); err != nil {
		return nil, err
	}
	return st, nil
}

func compareStream(want, got jetstream.StreamConfig) error {
	var diffs jsprovision.Diffs
	diff := diffs.Add
	gs, ws := slices.Clone(got.Subjects), slices.Clone(want.Subjects)
	sort.Strings(gs)
	if !slices.Equal(gs, ws) {
		diff("subjects", ws, gs)
	}
	if got.Storage != want.Storage {
		diff("storage", want.Storage, got.Storage)
	}
	if got.Retention != want.Retention {
		diff("retention", want.Retention, got.Retention)
	}
	for _, l := range []struct {
		name string
		v    int64
	}{{"max_msgs", got.MaxMsgs}, {"max_bytes", got.MaxBytes}, {"max_msgs_per_subject", got.MaxMsgsPerSubject}} {
		if l.v > 0 {
			diff(l.name, "unlimited", l.v)
		}
	}
	if got.MaxAge != 0 {
		diff("max_age", "unlimited", got.MaxAge)
	}
	if got.Replicas != want.Replicas {
		diff("replicas", want.Replicas, got.Replicas)
	}
	if got.Duplicates < want.Duplicates {
		diff("duplicate_window", fmt.Sprintf("at least %v", want.Duplicates), got.Duplicates)
	}
	if !got.AllowAtomicPublish {
		diff("allow_atomic", true, false)
	}
	if !got.AllowDirect {
		diff("allow_direct", true, false)
	}
	if !got.DenyDelete {
		diff("deny_delete", true, false)
	}
	if !got.DenyPurge {
		diff("deny_purge", true, false)
	}
	if got.Sealed {
		diff("sealed", false, true)
	}
	if got.Mirror != nil {
		diff("mirror", "none", got.Mirror.Name)
	}
	if len(diffs) == 0 {
		return nil
	}
	return errorf(ErrStreamConflict, "", "stream %s exists with a conflicting configuration: %s",
		want.Name, diffs)
}

// EnsureLeaseBucket creates the write-lease key-value bucket, or verifies an
// existing one (same kind of conflict error as EnsureStream). A lease is a
// key whose value ages out LeaseTTL after its last write; the bucket keeps a
// limit marker when one does, so watchers see a lapse as a delete.
func EnsureLeaseBucket(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.KeyValue, error) {
	cfg = cfg.withDefaults()
	want := jetstream.KeyValueConfig{
		Bucket:         cfg.LeaseBucket,
		Description:    "dshq session write leases",
		History:        1,
		TTL:            cfg.LeaseTTL,
		Storage:        jetstream.FileStorage,
		Replicas:       cfg.Replicas,
		LimitMarkerTTL: cfg.LeaseTTL,
	}
	kv, err := js.CreateKeyValue(ctx, want)
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, cfg.LeaseBucket)
		if err != nil {
			return nil, fmt.Errorf("ensure lease bucket %s: %w", cfg.LeaseBucket, err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			return nil, fmt.Errorf("ensure lease bucket %s: %w", cfg.LeaseBucket, err)
		}
		var diffs jsprovision.Diffs
		if st.TTL() != want.TTL {
			diffs.Add("ttl", want.TTL, st.TTL())
		}
		if st.History() != 1 {
			diffs.Add("history", 1, st.History())
		}
		if st.BackingStore() != "JetStream" {
			diffs = append(diffs, fmt.Sprintf("backing store is %s", st.BackingStore()))
		}
		if len(diffs) > 0 {
			return nil, errorf(ErrStreamConflict, "", "lease bucket %s exists with a conflicting configuration: %s",
				cfg.LeaseBucket, diffs)
		}
		return kv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ensure lease bucket %s: %w", cfg.LeaseBucket, err)
	}
	return kv, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DiscoverStreamConfig returns the StreamConfig of an already provisioned
// deployment: the session log stream named name ("" = dshq.SessionStream)
// with its replicas and duplicate window, and the lease TTL of the default
// lease bucket when it exists. A client that must work with whatever a
// server provisioned (dshq import, export) passes it to NewStore, so the
// Store's verification finds nothing to conflict with. A missing stream is
// jetstream.ErrStreamNotFound (wrapped).
func DiscoverStreamConfig(ctx context.Context, js jetstream.JetStream, name string) (StreamConfig, error) {
	cfg := StreamConfig{Name: name}.withDefaults()
	st, err := js.Stream(ctx, cfg.Name)
	if err != nil {
		return StreamConfig{}, fmt.Errorf("stream %s: %w", cfg.Name, err)
	}
	info := st.CachedInfo().Config
	cfg.Replicas, cfg.Duplicates = info.Replicas, max(info.Duplicates, cfg.Duplicates)
	kv, err := js.KeyValue(ctx, cfg.LeaseBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return cfg, nil
	}
	if err != nil {
		return StreamConfig{}, fmt.Errorf("lease bucket %s: %w", cfg.LeaseBucket, err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		return StreamConfig{}, fmt.Errorf("lease bucket %s: %w", cfg.LeaseBucket, err)
	}
	cfg.LeaseTTL = status.TTL()
	return cfg, nil
}
