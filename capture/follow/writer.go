package follow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// WriterLock is a watcher's writer identity (bus.WithWriter) and the
// machine-wide lock it holds on it: the identity survives the watcher's
// restart, so a restarted watcher takes back at once the leases its killed
// predecessor left (docs/harnesses.md#dshq-watch), and the lock keeps a
// second live watcher from using it, which would take leases from the
// first.
type WriterLock struct {
	// Name is the identity: dshq-watch@HOST/<hash of the roots>.
	Name string
	// Path is the lock file.
	Path string
	f    *os.File
}

// WriterBusyError is LockWriter's refusal: another live process on this
// machine holds the identity (for dshq watch, a watch of the same roots).
type WriterBusyError struct {
	Name, Path string
}

func (e *WriterBusyError) Error() string {
	return fmt.Sprintf("another process holds writer identity %s on this machine (lock %s)", e.Name, e.Path)
}

// WriterName returns the writer identity of a watcher of roots on host:
// the same for the same host and set of roots, whatever their order.
func WriterName(host string, roots []Root) string {
	return fmt.Sprintf("dshq-watch@%s/%s", host, rootsHash(roots))
}

// rootsHash names a set of roots, whatever their order.
func rootsHash(roots []Root) string {
	keys := make([]string, 0, len(roots))
	for _, r := range roots {
		keys = append(keys, string(r.Format)+"\x00"+filepath.Clean(r.Dir))
	}
	sort.Strings(keys)
	sum := sha256.Sum256([]byte(strings.Join(keys, "\x00\x00")))
	return hex.EncodeToString(sum[:8])
}

// LockWriter takes the lock of writer identity name (WriterName, or any
// name one kind of process uses on a machine, such as dshq import's), a
// file under dir (created when missing). The lock lasts until Unlock or
// the process's end, however it ends (kill -9 included): it is the
// system's (flock), not a file's presence. A held lock is
// *WriterBusyError. Where the system has no such lock, the identity is ""
// (no identity: a restarted process waits for its old leases to lapse).
func LockWriter(dir, name string) (*WriterLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("writer lock: %w", err)
	}
	sum := sha256.Sum256([]byte(name))
	path := filepath.Join(dir, hex.EncodeToString(sum[:8])+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("writer lock: %w", err)
	}
	ok, supported, err := tryLock(f)
	switch {
	case err != nil:
		_ = f.Close()
		return nil, fmt.Errorf("writer lock %s: %w", path, err)
	case !supported:
		_ = f.Close()
		return &WriterLock{}, nil
	case !ok:
		_ = f.Close()
		return nil, &WriterBusyError{Name: name, Path: path}
	}
	return &WriterLock{Name: name, Path: path, f: f}, nil
}

// Unlock releases the lock (the file stays, for the next watcher).
func (l *WriterLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
