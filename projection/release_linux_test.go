//go:build linux

package projection

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/dshq/dshq/internal/procmaps"
)

// mappedKiB sums the resident size of this process's maps of path.
func mappedKiB(t *testing.T, path string) int {
	t.Helper()
	kib, err := procmaps.ResidentKiB(os.Getpid(), func(p string) string {
		if p == path {
			return "store"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return kib["store"]
}

// TestStoreReleaseMappedDropsPages: the pages of the store's map that reads
// made resident leave the process's resident set; reads after the release
// see the same data.
func TestStoreReleaseMappedDropsPages(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "projection.db")
	st, err := openStore(path, false, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	val := bytes.Repeat([]byte("v"), 512)
	if err := st.db.Update(func(tx *bolt.Tx) error {
		for i := range 8000 {
			if err := tx.Bucket(bucketQuarantine).Put(fmt.Appendf(nil, "k%06d", i), val); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	readAll := func() (n int) {
		if err := st.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketQuarantine).ForEach(func(_, v []byte) error {
				if bytes.Equal(v, val) {
					n++
				}
				return nil
			})
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := readAll(); n != 8000 {
		t.Fatalf("read %d values, want 8000", n)
	}
	before := mappedKiB(t, path)
	if before < 1024 {
		t.Fatalf("%d KiB of the store resident after reading 4 MB of it", before)
	}
	if err := st.releaseMapped(); err != nil {
		t.Fatal(err)
	}
	if after := mappedKiB(t, path); after >= before/4 {
		t.Fatalf("resident KiB of the store: %d before the release, %d after", before, after)
	}
	if n := readAll(); n != 8000 {
		t.Fatalf("after the release: read %d values, want 8000", n)
	}
}
