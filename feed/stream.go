package feed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/jsprovision"
)

// Stream defaults. The feed is derived data (the projection can always say
// what is current), so it is bounded: a subscriber resumes from any
// generation still retained, and one older than that is told so
// (ErrNotRetained) and resynchronises from the query API.
const (
	// DefaultMaxAge is how long a feed message is retained.
	DefaultMaxAge = 7 * 24 * time.Hour
	// DefaultMaxBytes bounds the feed stream's size (oldest messages go
	// first): about a million events' messages. A new stream with a Budget
	// gets at most a quarter of it.
	DefaultMaxBytes = 1 << 30
	// MinDefaultMaxBytes is the least a Budget cuts the default size to.
	MinDefaultMaxBytes = 16 << 20
	// DefaultDuplicates is the duplicate window: a message published again
	// within it is stored once. Publish's retries, Resume and the
	// projector's rule read what the feed's tail holds instead of relying
	// on it (a commit re-published after a crash is stored once whatever
	// the window), so it only has to cover a message still in flight when
	// a retry reads the tail: Publish retries for DefaultPublishTimeout.
	// The server keeps every id of the window in memory (about a hundred
	// bytes each, at the feed's message rate), so it is no longer.
	DefaultDuplicates = DefaultPublishTimeout
)

// StreamConfig says what EnsureStream provisions. The zero value is the
// default deployment.
type StreamConfig struct {
	// Name is the stream name ("" = dshq.FeedStream).
	Name string
	// MaxAge is the retention age (0 = DefaultMaxAge; negative = no age
	// limit).
	MaxAge time.Duration
	// MaxBytes is the size limit (0 = DefaultMaxBytes; negative = none).
	MaxBytes int64
	// MaxMsgs is the message count limit (0 = none).
	MaxMsgs int64
	// Duplicates is the duplicate window (0 = DefaultDuplicates).
	Duplicates time.Duration
	// Replicas is the replica count (0 = 1).
	Replicas int
	// Budget, when positive, is the storage JetStream can still reserve
	// for the stream (bytes): a new stream whose MaxBytes is left at 0 gets
	// DefaultMaxBytes or a quarter of Budget, whichever is less (at least
	// MinDefaultMaxBytes), so that a small disk does not refuse the feed.
	Budget int64
	// Adopt makes EnsureStream take an existing stream's limits (MaxAge,
	// MaxBytes, MaxMsgs, Duplicates) for the ones left at 0 here, and
	// update the ones set here when they differ, instead of refusing them;
	// it also turns on the block compression of a stream created without.
	// Subjects, storage, retention and replicas must match either way.
	Adopt bool
	// SyncWrites makes a new single-replica stream flush and sync every
	// write as the server's sync policy says, instead of the asynchronous
	// persist mode the feed uses by default (see jsConfig).
	SyncWrites bool
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.Name == "" {
		c.Name = dshq.FeedStream
	}
	if c.MaxAge == 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.MaxAge < 0 {
		c.MaxAge = 0
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
		if c.Budget > 0 {
			c.MaxBytes = max(min(c.MaxBytes, c.Budget/4), MinDefaultMaxBytes)
		}
	}
	if c.MaxBytes < 0 {
		c.MaxBytes = -1
	}
	if c.MaxMsgs <= 0 {
		c.MaxMsgs = -1
	}
	if c.Duplicates == 0 {
		c.Duplicates = DefaultDuplicates
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	return c
}

// jsConfig is the JetStream configuration of the feed: file storage, limits
// retention discarding the oldest, no per-subject limit (a session's
// messages must all stay for resume to be gap-free), direct get for the
// publisher's checkpoint read, S2 compression of its blocks (its JSON
// repeats workspace keys, tokens and member names), and — with one replica
// and unless SyncWrites — the asynchronous persist mode: the server writes
// feed messages in the background instead of syncing each one. The feed is
// derived from the projection: what a crash loses of its tail, the
// projector publishes again on its next start
// (docs/protocol.md#55-publishing-and-the-projectors-rule), with the same
// generations and message ids. A replicated stream is synced by
// its replication log and keeps the default mode (the server refuses async
// there).
func (c StreamConfig) jsConfig() jetstream.StreamConfig {
	persist := jetstream.DefaultPersistMode
	if c.Replicas == 1 && !c.SyncWrites {
		persist = jetstream.AsyncPersistMode
	}
	return jetstream.StreamConfig{
		Name:              c.Name,
		Description:       "dshq live feed: what the projector committed",
		Subjects:          []string{dshq.FeedSubjects},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxAge:            c.MaxAge,
		MaxBytes:          c.MaxBytes,
		MaxMsgs:           c.MaxMsgs,
		MaxMsgsPerSubject: -1,
		MaxMsgSize:        -1,
		Duplicates:        c.Duplicates,
		Replicas:          c.Replicas,
		AllowDirect:       true,
		Compression:       jetstream.S2Compression,
		PersistMode:       persist,
	}
}

// ErrStreamConflict is wrapped by EnsureStream's refusal of an existing
// stream whose configuration is not the one asked for.
var ErrStreamConflict = errors.New("feed stream configuration conflict")

// EnsureStream creates the feed stream, or verifies an existing one. It is
// idempotent. An existing stream that differs from cfg (subjects, storage,
// retention, limits, duplicate window, replicas) is refused with an error
// wrapping ErrStreamConflict naming every difference; it is never updated
// silently — change limits with UpdateStream.
//
// A server that cannot reserve MaxBytes refuses to create the stream
// ("insufficient storage resources available", error code 10047): the error then says so and names the size asked for.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	given := cfg
	cfg = cfg.withDefaults()
	want := cfg.jsConfig()
	st, existed, err := jsprovision.CreateOrBind(ctx, js, want)
	if existed {
		if err != nil {
			return nil, fmt.Errorf("ensure feed stream %s: %w", cfg.Name, err)
		}
		got := st.CachedInfo().Config
		if given.Adopt {
			return adopt(ctx, js, given, want, got)
		}
		if err := compareStream(want, got); err != nil {
			return nil, err
		}
		return st, nil
	}
	if err != nil {
		if isInsufficientStorage(err) {
			return nil, fmt.Errorf("ensure feed stream %s: the server cannot reserve its %d max bytes (size it with a smaller MaxBytes): %w", cfg.Name, cfg.MaxBytes, err)
		}
		return nil, fmt.Errorf("ensure feed stream %s: %w", cfg.Name, err)
	}
	return st, nil
}

// adopt keeps an existing stream's limits where given leaves them at 0 and
// updates the ones given sets when they differ.
func adopt(ctx context.Context, js jetstream.JetStream, given StreamConfig, want, got jetstream.StreamConfig) (jetstream.Stream, error) {
	if given.MaxAge == 0 {
		want.MaxAge = got.MaxAge
	}
	if given.MaxBytes == 0 {
		want.MaxBytes = got.MaxBytes
	}
	if given.MaxMsgs == 0 {
		want.MaxMsgs = got.MaxMsgs
	}
	if given.Duplicates == 0 {
		want.Duplicates = got.Duplicates
	}
	if err := compareStream(want, got); err == nil && got.Compression == want.Compression {
		return js.Stream(ctx, want.Name)
	}
	limits := got
	limits.MaxAge, limits.MaxBytes, limits.MaxMsgs, limits.Duplicates = want.MaxAge, want.MaxBytes, want.MaxMsgs, want.Duplicates
	limits.Compression = want.Compression // the server compresses the blocks it writes from now on
	if err := compareStream(want, limits); err != nil {
		return nil, err // more than limits differ
	}
	st, err := js.UpdateStream(ctx, limits)
	if err != nil {
		if isInsufficientStorage(err) {
			return nil, fmt.Errorf("update feed stream %s limits: the server cannot reserve %d max bytes: %w", want.Name, want.MaxBytes, err)
		}
		return nil, fmt.Errorf("update feed stream %s limits: %w", want.Name, err)
	}
	return st, nil
}

// isInsufficientStorage reports whether err is the server's refusal to
// reserve a stream's storage.
func isInsufficientStorage(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrStorageResourcesExceeded
}

// jsErrStorageResourcesExceeded is the server's error code for "insufficient
// storage resources available".
const jsErrStorageResourcesExceeded jetstream.ErrorCode = 10047

// UpdateStream changes an existing feed stream's limits (age, bytes,
// messages, duplicate window) to cfg's. Shrinking a limit removes the
// oldest messages at once.
// The stream keeps its persist mode (the server cannot change it).
func UpdateStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	cfg = cfg.withDefaults()
	want := cfg.jsConfig()
	if cur, err := js.Stream(ctx, cfg.Name); err == nil {
		want.PersistMode = cur.CachedInfo().Config.PersistMode
	}
	st, err := js.UpdateStream(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("update feed stream %s: %w", cfg.Name, err)
	}
	return st, nil
}

func compareStream(want, got jetstream.StreamConfig) error {
	var diffs jsprovision.Diffs
	diff := diffs.Add
	if !slices.Equal(got.Subjects, want.Subjects) {
		diff("subjects", want.Subjects, got.Subjects)
	}
	if got.Storage != want.Storage {
		diff("storage", want.Storage, got.Storage)
	}
	if got.Retention != want.Retention {
		diff("retention", want.Retention, got.Retention)
	}
	if got.Discard != want.Discard {
		diff("discard", want.Discard, got.Discard)
	}
	if got.MaxAge != want.MaxAge {
		diff("max_age", want.MaxAge, got.MaxAge)
	}
	if got.MaxBytes != want.MaxBytes {
		diff("max_bytes", want.MaxBytes, got.MaxBytes)
	}
	if got.MaxMsgs != want.MaxMsgs {
		diff("max_msgs", want.MaxMsgs, got.MaxMsgs)
	}
	if got.MaxMsgsPerSubject > 0 {
		diff("max_msgs_per_subject", "unlimited", got.MaxMsgsPerSubject)
	}
	if got.Duplicates != want.Duplicates {
		diff("duplicate_window", want.Duplicates, got.Duplicates)
	}
	if got.Replicas != want.Replicas {
		diff("replicas", want.Replicas, got.Replicas)
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("feed stream %s exists with another configuration: %s: %w",
		want.Name, diffs, ErrStreamConflict)
}

// ReplaceSyncedStream replaces a single-replica feed stream that syncs
// every write (one created before the feed used the asynchronous persist
// mode, which a stream cannot change) with one as EnsureStream creates it,
// keeping its size and age limits and continuing its sequence: the new stream reads as
// one whose messages all aged out, so the projector's rule publishes from
// the projection's generation on (nothing again), and a subscriber resuming
// into the old history is told it is no longer retained (ErrNotRetained)
// and resynchronises from the query API. It reports whether it replaced
// the stream; a stream in the asynchronous mode, a replicated one, or one
// that cfg.SyncWrites keeps synced is left as it is.
func ReplaceSyncedStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (bool, error) {
	cfg = cfg.withDefaults()
	st, err := js.Stream(ctx, cfg.Name)
	if err != nil {
		return false, fmt.Errorf("replace feed stream %s: %w", cfg.Name, err)
	}
	info := st.CachedInfo()
	got := info.Config
	if cfg.SyncWrites || got.Replicas != 1 || got.PersistMode == jetstream.AsyncPersistMode {
		return false, nil
	}
	want := cfg.jsConfig()
	want.MaxAge, want.MaxBytes, want.MaxMsgs = got.MaxAge, got.MaxBytes, got.MaxMsgs
	want.FirstSeq = info.State.LastSeq + 1
	if err := js.DeleteStream(ctx, cfg.Name); err != nil {
		return false, fmt.Errorf("replace feed stream %s: %w", cfg.Name, err)
	}
	if err := createAfterDelete(ctx, js, want); err != nil {
		return false, fmt.Errorf("replace feed stream %s: %w", cfg.Name, err)
	}
	return true, nil
}

// The server's answer to a create whose store could not be made
// (JSStreamCreateErrF, with the description of errStreamStoreFailed).
const (
	errCodeStreamCreate jetstream.ErrorCode = 10049
	storeFailed                             = "error creating store for stream"
)

// createAfterDelete creates a stream just deleted. When the deleted stream
// was its account's last, nats-server removes the account's emptied
// streams directory in a goroutine of its own after answering the delete
// (stream.stop in v2.15), and a create that runs meanwhile fails with
// "error creating store for stream" (its mkdir finds a parent gone). That
// failure stored nothing, so the create is asked again, a bounded number
// of times; any other error is returned at once.
func createAfterDelete(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	b := backoff.WithContext(backoff.WithMaxRetries(backoff.NewConstantBackOff(20*time.Millisecond), 10), ctx)
	return backoff.Retry(func() error {
		_, err := js.CreateStream(ctx, cfg)
		var api *jetstream.APIError
		if err != nil && !(errors.As(err, &api) && api.ErrorCode == errCodeStreamCreate && api.Description == storeFailed) {
			return backoff.Permanent(err)
		}
		return err
	}, b)
}
