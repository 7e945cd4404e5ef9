package follow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/capture"
)

// Watcher defaults.
const (
	// DefaultIdle is how long a file may stay unchanged before its sessions'
	// write handles are closed (they are then no longer live).
	DefaultIdle = 2 * time.Minute
	// DefaultPoll is the polling interval when inotify is not available.
	DefaultPoll = 250 * time.Millisecond
	// DefaultRescan is how often the roots are walked for changes that
	// inotify did not report (it never loses one on a healthy system; the
	// walk is the safety net: an overflowed queue, a watch limit reached).
	DefaultRescan = 10 * time.Second
	// DefaultParallel bounds the files resumed at once.
	DefaultParallel = 4
)

// Config configures a Watcher.
type Config struct {
	// Store publishes (write leases, expected sequences, retries).
	Store *bus.Store
	// Roots are the directories followed. A root that does not exist yet
	// is looked for again at every rescan.
	Roots []Root
	// Native publishes a deepseek-harness file of a FormatDeepseek root:
	// data is its content up to its last newline (the whole file for a
	// zstd one). Without it, deepseek-harness roots are refused.
	Native func(ctx context.Context, path string, data []byte) error
	// Idle, Poll, Rescan and Parallel default to the constants above.
	Idle, Poll, Rescan time.Duration
	Parallel           int
	// ForcePoll polls instead of using inotify.
	ForcePoll bool
	// Report receives what happens (nil: nothing). It is called from
	// several goroutines, one at a time.
	Report func(Report)
	// Logger receives diagnostics (default: discard).
	Logger *slog.Logger
	// Machine is the machine the files are captured on: the headers of
	// the sessions the watcher creates name it ("": none).
	Machine string
}

// ReportKind names what a Report says.
type ReportKind string

// The reports.
const (
	// ReportWatching: the watcher follows Path (a root), by Detail
	// ("inotify" or "polling every …").
	ReportWatching ReportKind = "watching"
	// ReportMissing: root Path does not exist (yet): it is looked for at
	// every rescan.
	ReportMissing ReportKind = "missing"
	// ReportLive: the watcher holds SessionID's write lease: the session
	// is live while its file (Path) is written.
	ReportLive ReportKind = "live"
	// ReportPublished: Events events of SessionID were stored.
	ReportPublished ReportKind = "published"
	// ReportIdle: Path stayed unchanged for the idle time; SessionID's
	// handle was closed (the session is no longer live).
	ReportIdle ReportKind = "idle"
	// ReportNotice: something to be told once about SessionID (Detail).
	ReportNotice ReportKind = "notice"
	// ReportRetry: a write to SessionID failed for a reason that passes
	// (the bus overloaded or unreachable past the SDK's own retries, a lease
	// not yet lapsed); it is retried where it stopped (Err).
	ReportRetry ReportKind = "retry"
	// ReportError: following Path failed (Err); it is resumed from what the
	// stream holds after a pause.
	ReportError ReportKind = "error"
)

// Report is one thing the watcher tells.
type Report struct {
	Kind      ReportKind
	Time      time.Time
	Path      string
	Format    capture.Format
	SessionID string
	Events    int
	Detail    string
	Err       error
}

// Watcher follows harness roots and publishes what the harnesses append
// (docs/harnesses.md#dshq-watch).
type Watcher struct {
	cfg      Config
	reportMu sync.Mutex
	mode     string
}

// NewWatcher returns a watcher of cfg.Roots.
func NewWatcher(cfg Config) (*Watcher, error) {
	if cfg.Store == nil {
		return nil, errors.New("follow: a watcher needs a Store")
	}
	if len(cfg.Roots) == 0 {
		return nil, errors.New("follow: no root to watch")
	}
	for _, r := range cfg.Roots {
		if r.Format == capture.FormatDeepseek && cfg.Native == nil {
			return nil, fmt.Errorf("follow: deepseek-harness root %s needs Config.Native", r.Dir)
		}
		if r.Format != capture.FormatDeepseek && !Harness(r.Format) {
			return nil, fmt.Errorf("follow: root %s has unknown format %q", r.Dir, r.Format)
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Idle, DefaultIdle)
	def(&cfg.Poll, DefaultPoll)
	def(&cfg.Rescan, DefaultRescan)
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Watcher{cfg: cfg}, nil
}

func (w *Watcher) report(r Report) {
	if w.cfg.Report == nil {
		return
	}
	r.Time = time.Now()
	w.reportMu.Lock()
	defer w.reportMu.Unlock()
	w.cfg.Report(r)
}
