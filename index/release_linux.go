//go:build linux

package index

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/dshq/dshq/internal/procmaps"
)

// ReleaseMapped drops the pages of the index's segment files from the
// process's resident set (madvise MADV_DONTNEED).
//
// Bleve maps every segment file whole (shared, read-only). Each batch looks
// every new doc id up in every segment's id dictionary, and searches read
// postings and stored fields, so the pages a long-running process has
// touched — and its resident set — grow with the whole index. The pages
// stay in the kernel's page cache: a later read maps them again with a
// minor fault, and memory pressure reclaims them as any cached file.
//
// Only the maps of segments held by a reader taken here are advised: Bleve
// unmaps a segment only once no reader holds it, so no address advised can
// have been unmapped and reused meanwhile.
func (x *Index) ReleaseMapped() error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.idx == nil {
		return indexError(ErrClosed, "release mapped pages")
	}
	ix, err := x.idx.Advanced()
	if err != nil {
		return fmt.Errorf("release mapped pages: %w", err)
	}
	r, err := ix.Reader()
	if err != nil {
		return fmt.Errorf("release mapped pages: %w", err)
	}
	defer r.Close()
	snap, ok := r.(*scorch.IndexSnapshot)
	if !ok {
		return nil
	}
	// The held segments' files, by inode and name.
	type fileID struct {
		ino  uint64
		name string
	}
	held := map[fileID]bool{}
	for _, ss := range snap.Segments() {
		seg, ok := ss.Segment().(interface{ Path() string })
		if !ok {
			continue // in memory, not yet persisted
		}
		fi, err := os.Stat(seg.Path())
		if err != nil {
			continue // removed already: unmapped with its last reader
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			held[fileID{st.Ino, filepath.Base(seg.Path())}] = true
		}
	}
	if len(held) == 0 {
		return nil
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return fmt.Errorf("release mapped pages: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		start, end, ino, path, ok := procmaps.ParseLine(sc.Bytes())
		if !ok || !held[fileID{ino, filepath.Base(path)}] {
			continue
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, start, end-start, syscall.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("release mapped pages: madvise: %w", errno)
		}
	}
	return sc.Err()
}
