package projection

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The store commits without fsync where the running boot can be told
// (docs/architecture.md#reliability): the stream is the log, so a commit need
// not reach the disk before its records are acknowledged. What makes that
// safe is which stops can lose such commits:
//
//   - a process that dies (a crash, SIGKILL) leaves its writes in the
//     kernel's page cache: the file is exactly its last commit, and the
//     projector resumes from that commit's checkpoint;
//   - a system that stops (power loss, kernel panic) may keep any subset of
//     the pages written since the last fsync, and bbolt reuses the pages it
//     freed one commit later, so no earlier commit survives intact either:
//     the store is rebuilt from the stream.
//
// The marker file beside the store tells the two apart: it is written and
// synced, naming the boot, before the first commit without fsync, and
// removed once Close has synced the store.

// unsyncedSuffix names the marker beside a store file (path + suffix).
const unsyncedSuffix = ".unsynced"

// ErrUnsyncedAtStop is wrapped (with ErrCorruptStore) by opening a store that
// held commits not yet on disk when the system stopped, or whose last sync
// failed: its file cannot be trusted, and the projection is rebuilt from the
// stream.
var ErrUnsyncedAtStop = fmt.Errorf("%w: it held commits not yet on disk when the system stopped", ErrCorruptStore)

// checkUnsynced reads the marker of the store at path. It returns resumed
// when the marker is of boot (this process's predecessor stopped without
// Close, the system did not: its commits are intact in the page cache), and
// an error wrapping ErrUnsyncedAtStop when it is of another boot, of none
// (a failed sync), or unreadable.
func checkUnsynced(path, boot string) (resumed bool, err error) {
	raw, err := os.ReadFile(path + unsyncedSuffix)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: %s: %v", ErrUnsyncedAtStop, path, err)
	}
	was := string(bytes.TrimSpace(raw))
	if boot == "" || was != boot {
		if was == "" {
			was = "none: its last sync failed"
		}
		return false, fmt.Errorf("%w: %s (written during boot %s, now %s)", ErrUnsyncedAtStop, path, was, bootOrUnknown(boot))
	}
	return true, nil
}

func bootOrUnknown(b string) string {
	if b == "" {
		return "unknown"
	}
	return b
}

// markUnsynced durably records that the store at path may hold commits of
// boot that are not on disk: the marker file is synced, and so is its
// directory. boot "" records a failed sync (any later open rebuilds).
func markUnsynced(path, boot string) error {
	name := path + unsyncedSuffix
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("mark store unsynced: %w", err)
	}
	_, werr := f.WriteString(boot + "\n")
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		return fmt.Errorf("mark store unsynced: %w", err)
	}
	return syncFile(filepath.Dir(path))
}

// clearUnsynced removes the marker of the store at path, after a sync.
func clearUnsynced(path string) error {
	err := os.Remove(path + unsyncedSuffix)
	if errors.Is(err, os.ErrNotExist) {
		return nil // removed with its directory, or never written
	}
	if err != nil {
		return fmt.Errorf("clear store's unsynced marker: %w", err)
	}
	return syncFile(filepath.Dir(path))
}
