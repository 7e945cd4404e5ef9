//go:build linux

package projection

import (
	"fmt"
	"syscall"
)

// releaseMapped drops the pages of the store's memory map from the process's
// resident set (madvise MADV_DONTNEED), once a batch has committed.
//
// bbolt reads the file through a shared read-only map, and every batch
// copies the leaves it changes to new pages, so over a long catch-up the
// pages the process has touched — and its resident set — grow with the
// whole file. The pages stay in the kernel's page cache (the map is shared
// and clean): a later read maps them again with a minor fault, and memory
// pressure reclaims them as any cached file. What changes is what the
// process holds: its resident set follows the batch, not the store.
//
// bbolt replaces the map only under its mmap lock held exclusively, which
// waits for every read transaction, so the address is the live map for as
// long as tx is open.
func (s *store) releaseMapped() error {
	tx, err := s.db.Begin(false)
	if err != nil {
		return fmt.Errorf("release store pages: %w", err)
	}
	defer tx.Rollback()
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, s.db.Info().Data, uintptr(tx.Size()), syscall.MADV_DONTNEED); errno != 0 {
		return fmt.Errorf("release store pages: madvise: %w", errno)
	}
	return nil
}
