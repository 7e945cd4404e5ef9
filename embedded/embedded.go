// Package embedded runs a nats-server with JetStream inside the process:
// the data directory of `dshq serve` (Home/nats) and the server of every
// test. Only process wiring (node, the commands) and tests import it, so
// the harness SDK (bus) and the query wire (query) link no server.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// SyncPolicy says when the embedded server syncs JetStream writes to disk.
type SyncPolicy int

const (
	// SyncAlways (the default) is sync_interval: always: a publish is
	// acknowledged only after its record is fsynced, so acknowledged means on
	// disk and survives a machine crash.
	SyncAlways SyncPolicy = iota
	// SyncRelaxed uses the server's periodic sync (every two minutes by
	// default, SyncInterval when set): publishes are acknowledged once written
	// to the OS, which is several times faster, but a power loss or kernel
	// crash can lose the records acknowledged since the last sync. A process
	// crash loses nothing.
	SyncRelaxed
)

// DefaultReadyTimeout is how long Start waits for the server to accept
// connections.
const DefaultReadyTimeout = 10 * time.Second

// Config configures Start.
type Config struct {
	// Dir is the data directory (JetStream store under Dir/jetstream). It is
	// created if missing and locked for the life of the server.
	Dir string
	// Listen is "" for an in-process server with no network listener, or
	// "host:port" (port 0 = a random free port).
	Listen string
	// Sync is the disk sync policy; the zero value is SyncAlways.
	Sync SyncPolicy
	// SyncInterval is the relaxed sync period (0 = the server default).
	SyncInterval time.Duration
	// ServerName names the server ("" = "dshq-embedded").
	ServerName string
	// ReadyTimeout bounds the wait for readiness (0 = DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// Logger, when true, routes the server's own log to stderr.
	Logger bool
	// Configure, when set, adjusts the server options after the fields above
	// are applied: accounts, users and permissions, limits, TLS. It must not
	// change StoreDir or disable JetStream.
	Configure func(*server.Options)
}

// Server is a running embedded nats-server with JetStream.
type Server struct {
	srv  *server.Server
	lock *os.File
	dir  string
}

// ErrDataDirLocked is returned by Start when another server (in this
// or another process) already uses the data directory.
var ErrDataDirLocked = errors.New("data directory is in use by another server")

// Start starts a nats-server with JetStream file storage in cfg.Dir.
// A second instance on the same directory fails with ErrDataDirLocked.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("start embedded nats: data directory is empty")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	opts, err := embeddedOptions(cfg, dir)
	if err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	fatal := &fatalLog{err: make(chan error, 1)}
	if cfg.Logger {
		srv.ConfigureLogger()
	} else {
		srv.SetLogger(fatal, false, false)
	}
	go srv.Start() // Start returns once the server runs; Shutdown stops it.
	if err := waitReady(ctx, srv, cfg.ReadyTimeout, fatal.err); err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		lock.Close()
		return nil, err
	}
	return &Server{srv: srv, lock: lock, dir: dir}, nil
}

func embeddedOptions(cfg Config, dir string) (*server.Options, error) {
	name := cfg.ServerName
	if name == "" {
		name = "dshq-embedded"
	}
	opts := &server.Options{
		ServerName: name,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      !cfg.Logger,
	}
	switch cfg.Sync {
	case SyncAlways:
		opts.SyncAlways = true
	case SyncRelaxed:
		opts.SyncInterval = cfg.SyncInterval
	default:
		return nil, fmt.Errorf("unknown sync policy %d", cfg.Sync)
	}
	if cfg.Configure != nil {
		defer cfg.Configure(opts)
	}
	if cfg.Listen == "" {
		opts.DontListen = true
		return opts, nil
	}
	host, portStr, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", cfg.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("listen address %q: bad port", cfg.Listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts.Host, opts.Port = host, port
	return opts, nil
}

// waitReady waits until srv accepts connections, failing at once with the
// error the server reports as fatal (a listen address in use wraps
// syscall.EADDRINUSE).
func waitReady(ctx context.Context, srv *server.Server, timeout time.Duration, fatal <-chan error) error {
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	deadline := time.Now().Add(timeout)
	for !srv.ReadyForConnections(50 * time.Millisecond) {
		select {
		case err := <-fatal:
			return fmt.Errorf("start embedded nats: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("start embedded nats: not ready after %v", timeout)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("start embedded nats: %w", err)
		}
	}
	if !srv.JetStreamEnabled() {
		return errors.New("start embedded nats: JetStream is not enabled")
	}
	return ctx.Err()
}

// fatalLog is the server's logger when its own log is off: it drops every
// line but a fatal one, which it hands to waitReady, so that a start that
// cannot succeed (the client port taken) fails at once with its cause
// instead of waiting out the ready timeout.
type fatalLog struct{ err chan error }

func (l *fatalLog) Fatalf(format string, v ...any) {
	err := fmt.Errorf(format, v...)
	for _, a := range v {
		if e, ok := a.(error); ok && errors.Is(e, syscall.EADDRINUSE) {
			if oe := (*net.OpError)(nil); errors.As(e, &oe) && oe.Addr != nil {
				err = fmt.Errorf("cannot listen on %s: %w", oe.Addr, syscall.EADDRINUSE)
			} else {
				err = fmt.Errorf("cannot listen: %w", syscall.EADDRINUSE)
			}
		}
	}
	select {
	case l.err <- err:
	default: // the first fatal error is the cause
	}
}
func (*fatalLog) Noticef(string, ...any) {}
func (*fatalLog) Warnf(string, ...any)   {}
func (*fatalLog) Errorf(string, ...any)  {}
func (*fatalLog) Debugf(string, ...any)  {}
func (*fatalLog) Tracef(string, ...any)  {}

// lockDir takes an exclusive, non-blocking flock on dir/.dshq-nats.lock.
// flock locks belong to the open file description, so a second Server in
// the same process is refused just like a second process.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, ".dshq-nats.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start embedded nats: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("start embedded nats in %s: %w", dir, ErrDataDirLocked)
		}
		return nil, fmt.Errorf("start embedded nats: lock %s: %w", path, err)
	}
	return f, nil
}

// NATSServer returns the underlying nats-server.
func (e *Server) NATSServer() *server.Server { return e.srv }

// Dir returns the absolute data directory.
func (e *Server) Dir() string { return e.dir }

// ClientURL returns the nats:// URL of the listener, or "" for an
// in-process-only server.
func (e *Server) ClientURL() string {
	if e.srv.Addr() == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// InProcessConn connects to the server in-process (no network), with opts
// applied after the in-process option.
func (e *Server) InProcessConn(opts ...nats.Option) (*nats.Conn, error) {
	all := append([]nats.Option{nats.InProcessServer(e.srv)}, opts...)
	nc, err := nats.Connect("", all...)
	if err != nil {
		return nil, fmt.Errorf("connect in-process: %w", err)
	}
	return nc, nil
}

// Shutdown stops the server, waits for it to finish (or for ctx), and releases
// the data directory lock. It is safe to call more than once.
func (e *Server) Shutdown(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("shutdown embedded nats: %w", ctx.Err())
	}
	if e.lock != nil {
		e.lock.Close()
		e.lock = nil
	}
	return nil
}
