package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/fold"
	"github.com/dshq/dshq/internal/failover"
	"github.com/dshq/dshq/record"
)

// Store defaults.
const (
	// DefaultRetryMaxElapsed bounds the retries of one bus operation over
	// transient failures (server restart, leader change, timeouts).
	DefaultRetryMaxElapsed = 30 * time.Second
	// DefaultAttemptTimeout bounds one request to the server.
	DefaultAttemptTimeout = 2 * time.Second
	// DefaultCloseTimeout bounds Close, which is not cancellable.
	DefaultCloseTimeout = 10 * time.Second
)

// Access is a handle's access mode.
type Access string

// The two access modes of Open.
const (
	Read  Access = "read"
	Write Access = "write"
)

// Option configures a Store.
type Option func(*storeOptions)

type storeOptions struct {
	stream     StreamConfig
	maxElapsed time.Duration
	attempt    time.Duration
	knownType  func(string) bool
	atomicMin  int
	tenant     string // "" = the untenanted namespace
	holder     string // LeaseValue.Holder of this Store's leases
	writer     string // WithWriter's identity, "" = none
	notice     func(error)
}

// WithStreamConfig sets the stream and lease bucket (default: the zero
// StreamConfig).
func WithStreamConfig(c StreamConfig) Option { return func(o *storeOptions) { o.stream = c } }

// WithRetryMaxElapsed bounds retries of transient failures per operation
// (default DefaultRetryMaxElapsed). It must stay below the stream's
// duplicate window for retries to be deduplicated.
func WithRetryMaxElapsed(d time.Duration) Option {
	return func(o *storeOptions) { o.maxElapsed = d }
}

// WithWriter gives the Store's write leases a stable writer identity that
// survives the process (dshq watch names the machine and the roots it
// follows): a lease the same writer's earlier process left behind — it was
// killed before it released it — is taken back at once instead of waiting
// for it to lapse, while any other writer is still refused. At most one
// live process may use a given writer name (dshq watch holds a lock file for
// it); a Store never takes a lease from its own handles.
func WithWriter(name string) Option { return func(o *storeOptions) { o.writer = name } }

// WithRetryNotice sets a function told of every transient failure an
// operation retries (the server restarting, a leader being elected), from
// the retrying goroutine, so that a client can say it is waiting.
func WithRetryNotice(fn func(err error)) Option { return func(o *storeOptions) { o.notice = fn } }

// WithAttemptTimeout bounds each request (default DefaultAttemptTimeout).
func WithAttemptTimeout(d time.Duration) Option { return func(o *storeOptions) { o.attempt = d } }

// WithKnownTypes sets the event vocabulary the harness knows (default
// fold.KnownType). Reads and write opens refuse a stored event of any other
// type unless it is ignorable (ErrFormatUnsupported); appends store any type.
func WithKnownTypes(known func(eventType string) bool) Option {
	return func(o *storeOptions) { o.knownType = known }
}

// WithAtomicMin sets the smallest append published as one atomic batch
// (default DefaultAtomicMin; 0 = never, every record published on its own).
func WithAtomicMin(n int) Option { return func(o *storeOptions) { o.atomicMin = n } }

// Store is the persistence seam (docs/sdk.md#the-persistence-seam) on
// JetStream: it creates, opens, stats and lists sessions, and flushes its write
// handles. It is safe for concurrent use; many Stores in many processes share
// one stream.
type Store struct {
	nc *nats.Conn
	js jetstream.JetStream
	// stream is nil for a tenant's Store, which reads through reader only.
	stream jetstream.Stream
	reader logReader
	kv     leaseKV
	opts   storeOptions
	pub    *publisher

	mu      sync.Mutex // guards pending, writers and unsettled
	pending map[string]*Handle
	writers map[*Handle]struct{}
	// unsettled holds, by lease key, the value of a lease this Store may
	// have stored and holds through no handle: a claim that failed with
	// its outcome unknown (a create whose reply was lost, then no read
	// could tell), or a release that failed. The next claim of the key
	// reuses the value, so that it finds the key its own instead of
	// refusing itself as another writer until the lease ages out.
	unsettled map[string]unsettledLease
	// leased holds the lease keys this Store's handles hold or are
	// claiming: a second claim of one is refused here, before the bucket
	// (whose writer identity, WithWriter, would let it through).
	leased map[string]uint64
	// reservations numbers the marks of leased.
	reservations uint64
}

// unsettledLease is a lease value of Store.unsettled and when it was left.
type unsettledLease struct {
	value []byte
	at    time.Time
}

// NewStore provisions (or verifies) the stream and the lease bucket on nc and
// returns a Store. The Store does not own nc. A tenant's Store (WithTenant)
// provisions nothing: it checks that the stream and the bucket answer it.
func NewStore(ctx context.Context, nc *nats.Conn, opts ...Option) (*Store, error) {
	o := storeOptions{maxElapsed: DefaultRetryMaxElapsed, attempt: DefaultAttemptTimeout, knownType: fold.KnownType,
		atomicMin: DefaultAtomicMin}
	for _, opt := range opts {
		opt(&o)
	}
	o.stream = o.stream.withDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("new store: %w", err)
	}
	s := &Store{nc: nc, js: js, opts: o, pending: map[string]*Handle{}, writers: map[*Handle]struct{}{},
		unsettled: map[string]unsettledLease{}, leased: map[string]uint64{}}
	s.pub = &publisher{nc: nc, js: js, name: o.stream.Name, maxElapsed: o.maxElapsed, attempt: o.attempt, notice: o.notice,
		watch: failover.For(nc, failover.StreamLeaderElected(o.stream.Name), failover.StreamLeaderElected("KV_"+o.stream.LeaseBucket))}
	if o.tenant != "" {
		if err := s.initTenant(ctx); err != nil {
			return nil, fmt.Errorf("new store: %w", err)
		}
		s.pub.reader = s.reader
		return s, nil
	}
	err = s.pub.retry(ctx, func(ctx context.Context) error {
		st, err := EnsureStream(ctx, js, o.stream)
		if err != nil {
			return err
		}
		kv, err := js.KeyValue(ctx, o.stream.LeaseBucket)
		if err != nil {
			return err
		}
		s.stream, s.kv = st, jsLeases{kv: kv, nc: nc}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("new store: %w", err)
	}
	s.reader = streamReader{s}
	s.pub.reader = s.reader
	return s, nil
}

// CreateOption configures Create.
type CreateOption func(*createOptions)

type createOptions struct {
	inherited    int64
	hasInherited bool
}

// WithInheritedEventCount sets the length of the inherited (forked) prefix.
// It is required when the header is seeded and must be 0 otherwise.
func WithInheritedEventCount(n int64) CreateOption {
	return func(o *createOptions) { o.inherited, o.hasInherited = n, true }
}

// Create makes a new session and returns its write handle, holding the
// session's write lease. Nothing is published until the first Append or
// Flush; Close before either frees the id again. Errors: ErrInvalidArgument
// (bad id or header, inherited count mismatch), ErrAlreadyExists (the id is
// stored, pending in this Store, or being created or written elsewhere).
func (s *Store) Create(ctx context.Context, h dshq.Header, opts ...CreateOption) (*Handle, error) {
	var co createOptions
	for _, o := range opts {
		o(&co)
	}
	hrec, raw, err := buildHeader(h, co)
	if err != nil {
		return nil, err
	}
	id := h.ID
	tok, _ := record.SubjectToken(id)
	hd := newHandle(s, hrec, tok, Write)
	hd.headerRaw = raw
	s.mu.Lock()
	if _, ok := s.pending[id]; ok {
		s.mu.Unlock()
		return nil, alreadyExists(id)
	}
	s.pending[id] = hd // reserve; removed again on failure
	s.mu.Unlock()
	if err := s.claimNew(ctx, hd); err != nil {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Lock()
	s.writers[hd] = struct{}{}
	s.mu.Unlock()
	return hd, nil
}

// claimNew takes the lease of a session that must not exist yet.
func (s *Store) claimNew(ctx context.Context, hd *Handle) error {
	id := hd.id
	if exists, err := s.headerExists(ctx, hd.subject); err != nil {
		return err
	} else if exists {
		return alreadyExists(id)
	}
	l, err := s.acquire(ctx, hd.id, hd.token)
	if errors.Is(err, ErrAlreadyOwned) {
		return alreadyExists(id)
	}
	if err != nil {
		return err
	}
	// The previous owner may have materialised and closed between the check
	// and the claim.
	if exists, err := s.headerExists(ctx, hd.subject); err != nil || exists {
		_ = l.release(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		return alreadyExists(id)
	}
	hd.lease = l
	return nil
}

func alreadyExists(id string) error {
	return errorf(ErrAlreadyExists, id, "session %q already exists", id)
}

func buildHeader(h dshq.Header, co createOptions) (dshq.HeaderRecord, []byte, error) {
	id := h.ID
	if err := record.ValidateSessionID(id); err != nil {
		return dshq.HeaderRecord{}, nil, wrapf(ErrInvalidArgument, id, err, "create session: %v", err)
	}
	if h.ParentSession != nil {
		if err := record.ValidateSessionID(*h.ParentSession); err != nil {
			return dshq.HeaderRecord{}, nil, wrapf(ErrInvalidArgument, id, err, "create session %q: parentSession: %v", id, err)
		}
	}
	if h.Version != dshq.FormatVersion2 {
		return dshq.HeaderRecord{}, nil, errorf(ErrInvalidArgument, id,
			"create session %q: header version is %d, want %d", id, h.Version, dshq.FormatVersion2)
	}
	switch {
	case co.inherited < 0 || co.inherited > maxSafeInt:
		return dshq.HeaderRecord{}, nil, errorf(ErrInvalidArgument, id,
			"create session %q: inheritedEventCount must be a non-negative safe integer, got %d", id, co.inherited)
	case h.IsSeeded && !co.hasInherited:
		return dshq.HeaderRecord{}, nil, errorf(ErrInvalidArgument, id,
			"create session %q: a seeded header requires inheritedEventCount", id)
	case !h.IsSeeded && co.inherited != 0:
		return dshq.HeaderRecord{}, nil, errorf(ErrInvalidArgument, id,
			"create session %q: inheritedEventCount %d on a header that is not seeded", id, co.inherited)
	}
	hrec := dshq.HeaderRecord{Header: h, FormatVersion: dshq.FormatVersion2, InheritedEventCount: co.inherited}
	raw, err := record.EncodeHeader(hrec)
	if err != nil {
		return dshq.HeaderRecord{}, nil, wrapf(ErrInvalidArgument, id, err, "create session %q: %v", id, err)
	}
	// What is stored must read back as the same header.
	back, err := record.ParseHeader(raw)
	if err != nil {
		return dshq.HeaderRecord{}, nil, wrapf(ErrInvalidArgument, id, err, "create session %q: %v", id, err)
	}
	back.Raw = raw
	return back, raw, nil
}

const maxSafeInt = 1<<53 - 1

// acquire takes the write lease of session id (subject token tok); a held
// lease is ErrAlreadyOwned. A lease this Store left unsettled on the key is
// claimed with its value, so that it is adopted as the Store's own.
func (s *Store) acquire(ctx context.Context, id, tok string) (*lease, error) {
	key := s.leaseKey(tok)
	mark := s.reserve(key)
	if mark == 0 {
		return nil, errorf(ErrAlreadyOwned, id, "session %q is already owned by another writer", id)
	}
	v := s.takeUnsettled(key)
	if v == nil {
		v = newLeaseValue(id, s.opts.holder, s.opts.writer) // the same value on every attempt
	}
	var l *lease
	err := s.pub.retry(ctx, func(ctx context.Context) error {
		var err error
		l, err = acquireLease(ctx, s.kv, key, v, s.opts.stream.LeaseTTL, s.opts.writer)
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSequence(err) {
			return errorf(ErrAlreadyOwned, id, "session %q is already owned by another writer%s", id, s.holderOf(ctx, key))
		}
		return err
	})
	switch {
	case err == nil:
		l.retry, l.unsettled = s.pub.retry, func() { s.unsettle(key, v) }
		l.mark, l.released = mark, func() { s.unreserve(key, mark) }
		return l, nil
	case !errors.Is(err, ErrAlreadyOwned):
		// The key may hold v: an attempt's create may have been stored.
		s.unsettle(key, v)
	}
	s.unreserve(key, mark)
	return l, err
}

// reserve marks the lease key as held or being claimed by this Store and
// returns the mark, or 0 when the key is marked already.
func (s *Store) reserve(key string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leased[key] != 0 {
		return 0
	}
	s.reservations++
	s.leased[key] = s.reservations
	return s.reservations
}

// unreserve ends reserve's mark (the lease was released, not taken, or its
// handle forgotten), unless the key was marked again since.
func (s *Store) unreserve(key string, mark uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unreserveLocked(key, mark)
}

func (s *Store) unreserveLocked(key string, mark uint64) {
	if s.leased[key] == mark {
		delete(s.leased, key)
	}
}

// takeUnsettled removes and returns the value of the lease this Store left
// unsettled on key, or nil.
func (s *Store) takeUnsettled(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.unsettled[key]
	delete(s.unsettled, key)
	if !ok || time.Since(u.at) >= s.opts.stream.LeaseTTL {
		return nil
	}
	return u.value
}

// unsettle records that key may hold the lease value v though no handle of
// this Store holds it. Values older than the lease TTL, whose keys have aged
// out, are dropped.
func (s *Store) unsettle(key string, v []byte) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, u := range s.unsettled {
		if now.Sub(u.at) >= s.opts.stream.LeaseTTL {
			delete(s.unsettled, k)
		}
	}
	s.unsettled[key] = unsettledLease{value: v, at: now}
}

// headerExists reports whether the subject holds any record.
func (s *Store) headerExists(ctx context.Context, subject string) (bool, error) {
	var exists bool
	err := s.pub.retry(ctx, func(ctx context.Context) error {
		_, err := s.reader.first(ctx, subject, 1)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			exists = false
			return nil
		}
		exists = err == nil
		return err
	})
	return exists, err
}

// Open returns a handle on a stored session. Read never takes ownership and
// works while another handle writes. Write claims the lease and validates
// the stored log. Errors: ErrInvalidArgument (bad id or access), ErrNotFound,
// ErrAlreadyOwned, ErrFormatUnsupported (unknown header version or event
// type; a failed write open releases its claim), ErrCorruption.
func (s *Store) Open(ctx context.Context, id string, access Access) (*Handle, error) {
	if access != Read && access != Write {
		return nil, errorf(ErrInvalidArgument, id, "open session %q: access must be %q or %q, got %q", id, Read, Write, access)
	}
	tok, err := record.SubjectToken(id)
	if err != nil {
		return nil, wrapf(ErrInvalidArgument, id, err, "open session: %v", err)
	}
	s.mu.Lock()
	p, pending := s.pending[id]
	s.mu.Unlock()
	if pending {
		if access == Write {
			return nil, errorf(ErrAlreadyOwned, id, "session %q is already owned by another writer", id)
		}
		return p.readView(), nil
	}
	hrec, hseq, _, err := s.loadHeader(ctx, id, tok)
	if err != nil {
		return nil, err
	}
	hd := newHandle(s, hrec, tok, access)
	hd.headerRaw, hd.materialised, hd.lastStreamSeq, hd.headerSeq = hrec.Raw, true, hseq, hseq
	if access == Read {
		return hd, nil
	}
	l, err := s.acquire(ctx, hd.id, hd.token)
	if err != nil {
		return nil, err
	}
	hd.lease = l
	if err := hd.loadForWrite(ctx); err != nil {
		_ = l.release(context.WithoutCancel(ctx))
		return nil, err
	}
	s.mu.Lock()
	s.writers[hd] = struct{}{}
	s.mu.Unlock()
	return hd, nil
}

// loadHeader reads and validates a session's header record; count is the
// subject's record count when the reader learned it in passing (nil
// otherwise).
func (s *Store) loadHeader(ctx context.Context, id, tok string) (hrec dshq.HeaderRecord, seq uint64, count *uint64, err error) {
	subject := s.subjectOf(tok)
	var msg *jetstream.RawStreamMsg
	err = s.pub.retry(ctx, func(ctx context.Context) error {
		var err error
		msg, count, err = s.reader.header(ctx, subject)
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return dshq.HeaderRecord{}, 0, nil, errorf(ErrNotFound, id, "session %q not found", id)
	}
	if err != nil {
		return dshq.HeaderRecord{}, 0, nil, fmt.Errorf("read header of session %q: %w", id, err)
	}
	hrec, err = record.ParseHeader(msg.Data)
	if errors.Is(err, record.ErrFormatUnsupported) {
		return dshq.HeaderRecord{}, 0, nil, wrapf(ErrFormatUnsupported, id, err, "%s", versionRefusal(id, msg.Data, err))
	}
	if err != nil {
		return dshq.HeaderRecord{}, 0, nil, wrapf(ErrCorruption, id, err, "stored session %q failed validation: %v", id, err)
	}
	if hrec.Header.ID != id {
		return dshq.HeaderRecord{}, 0, nil, errorf(ErrCorruption, id,
			"stored session identity mismatch: requested %q, header has %q", id, hrec.Header.ID)
	}
	hrec.Raw = msg.Data
	return hrec, msg.Sequence, count, nil
}

// Snapshot is what Stat and List report about a session.
type Snapshot struct {
	// Header is the session header (version 2 shape).
	Header dshq.Header
	// InheritedEventCount is the inherited prefix length.
	InheritedEventCount int64
	// Revision is the stream sequence of the session's last record (0 for a
	// session created in this Store and not yet materialised). Equal means
	// unchanged; it grows with every append and ignores lease churn.
	Revision uint64
	// EventCount is the number of stored events.
	EventCount int64
	// Live reports whether a writer holds the session's write lease
	// (docs/architecture.md#live-and-persisted).
	Live bool
}

// Stat returns the snapshot of a session without reading its log or taking
// ownership, or (nil, nil) for an unknown id, as upstream's undefined.
// Errors: ErrInvalidArgument (bad id), ErrCorruption and
// ErrFormatUnsupported (bad header), bus failures.
func (s *Store) Stat(ctx context.Context, id string) (*Snapshot, error) {
	tok, err := record.SubjectToken(id)
	if err != nil {
		return nil, wrapf(ErrInvalidArgument, id, err, "stat session: %v", err)
	}
	if p := s.pendingHandle(id); p != nil {
		return p.snapshot(), nil
	}
	hrec, _, count, err := s.loadHeader(ctx, id, tok)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// A count learned with the header precedes the last record's read, as
	// snapshotOf needs.
	return s.snapshotOf(ctx, hrec, tok, count)
}

func (s *Store) pendingHandle(id string) *Handle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending[id]
}

// snapshotOf builds a snapshot of the session with token tok; known is its
// subject's message count when the caller has it already.
func (s *Store) snapshotOf(ctx context.Context, hrec dshq.HeaderRecord, tok string, known *uint64) (*Snapshot, error) {
	subject := s.subjectOf(tok)
	var last uint64
	var count uint64
	err := s.pub.retry(ctx, func(ctx context.Context) error {
		// The count first: a record appended in between only makes the
		// revision newer than the count, never the count ahead.
		if known != nil {
			count = *known
		} else {
			n, err := s.reader.count(ctx, subject)
			if err != nil {
				return err
			}
			count = n
		}
		m, err := s.reader.last(ctx, subject)
		if err != nil {
			return err
		}
		last = m.Sequence
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stat session %q: %w", hrec.Header.ID, err)
	}
	n := int64(count) - 1
	if n < 0 {
		n = 0
	}
	live, err := s.live(ctx, tok)
	if err != nil {
		return nil, fmt.Errorf("stat session %q: %w", hrec.Header.ID, err)
	}
	return &Snapshot{Header: hrec.Header, InheritedEventCount: hrec.InheritedEventCount, Revision: last, EventCount: n, Live: live}, nil
}

// live reports whether the lease of the session with token tok is held.
func (s *Store) live(ctx context.Context, tok string) (bool, error) {
	var live bool
	err := s.pub.retry(ctx, func(ctx context.Context) error {
		e, err := s.kv.get(ctx, s.leaseKey(tok))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			live = false
			return nil
		}
		if err != nil {
			return err
		}
		live = e.Operation() == jetstream.KeyValuePut
		return nil
	})
	return live, err
}

// List returns a snapshot of every stored session of the Store's namespace
// (its tenant's, or the untenanted one) and of the sessions created in this
// Store and not yet materialised, in no promised order. A subject whose
// token or header is invalid holds no session
// (docs/events-and-surfaces.md#invalid-records-and-quarantine) and is skipped.
func (s *Store) List(ctx context.Context) ([]Snapshot, error) {
	var subjects map[string]uint64
	err := s.pub.retry(ctx, func(ctx context.Context) error {
		var err error
		subjects, err = s.reader.subjects(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var out []Snapshot
	seen := map[string]bool{}
	for subject := range subjects {
		tenant, tok, err := record.SplitLogKey(subject[len(dshq.LogSubjectPrefix):])
		if err != nil || tenant != s.opts.tenant {
			continue
		}
		id, _ := record.ParseSubjectToken(tok) // valid: SplitLogKey parsed it
		hrec, _, _, err := s.loadHeader(ctx, id, tok)
		if errors.Is(err, ErrCorruption) || errors.Is(err, ErrFormatUnsupported) || errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		count := subjects[subject]
		snap, err := s.snapshotOf(ctx, hrec, tok, &count)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		seen[id] = true
		out = append(out, *snap)
	}
	s.mu.Lock()
	var pend []*Handle
	for id, p := range s.pending {
		if !seen[id] {
			pend = append(pend, p)
		}
	}
	s.mu.Unlock()
	for _, p := range pend {
		out = append(out, *p.snapshot())
	}
	return out, nil
}

// Flush is the service-wide barrier: it flushes every write handle of this
// Store open at the call (materialising created sessions). A handle closing
// concurrently counts as flushed. Failures are a *FlushError naming each
// failing session; the other handles still flush.
func (s *Store) Flush(ctx context.Context) error {
	s.mu.Lock()
	hs := make([]*Handle, 0, len(s.writers))
	for h := range s.writers {
		hs = append(hs, h)
	}
	s.mu.Unlock()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex // guards failed
		failed = map[string]error{}
	)
	for _, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.Flush(ctx); err != nil && !errors.Is(err, ErrHandleClosed) {
				mu.Lock()
				failed[h.id] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		return &FlushError{Failed: failed}
	}
	return nil
}

// forget drops a closed write handle from the Store's books.
func (s *Store) forget(h *Handle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.writers, h)
	if s.pending[h.id] == h {
		delete(s.pending, h.id)
	}
	if h.lease != nil {
		s.unreserveLocked(h.lease.key, h.lease.mark) // the handle is gone: so is its claim
	}
}

// materialised moves a created handle out of pending once its header is
// stored.
func (s *Store) materialised(h *Handle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending[h.id] == h {
		delete(s.pending, h.id)
	}
}

// versionRefusal words the refusal of a header version, direction-aware as
// upstream: a newer version asks for an upgrade, an older one has no
// upgrade path.
func versionRefusal(id string, raw []byte, cause error) string {
	var h struct {
		Version json.Number `json:"version"`
	}
	if json.Unmarshal(raw, &h) == nil {
		if v, err := h.Version.Int64(); err == nil && v > dshq.FormatVersion2 {
			return fmt.Sprintf("stored session %q was written by a newer harness (format version %d) — upgrade the harness", id, v)
		} else if err == nil {
			return fmt.Sprintf("stored session %q uses an older format (version %d) with no upgrade path", id, v)
		}
	}
	return fmt.Sprintf("stored session %q has an unsupported format: %v", id, cause)
}
