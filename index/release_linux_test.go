//go:build linux

package index

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dshq/dshq/internal/procmaps"
)

// residentKiB sums the resident size of this process's maps of files under
// dir.
func residentKiB(t *testing.T, dir string) int {
	t.Helper()
	kib, err := procmaps.ResidentKiB(os.Getpid(), func(path string) string {
		if strings.HasPrefix(path, dir) {
			return "index"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	return kib["index"]
}

// TestReleaseMappedDropsSegmentPages: pages of the segment files that
// searches made resident leave the process's resident set, and searches
// after the release read the same results.
func TestReleaseMappedDropsSegmentPages(t *testing.T) {
	x, dir := openTest(t)
	dir, err := filepath.EvalSymlinks(dir)
	must(t, err)
	for b := range 4 {
		var docs []Doc
		for i := range 2000 {
			docs = append(docs, doc(fmt.Sprintf("s%04d", i), int64(b), int64(b*2000+i), fmt.Sprintf("needle haystack %d word%d", i, i%97)))
		}
		apply(t, x, uint64(b+1), docs...)
	}
	search := func() []hitKey {
		var all []hitKey
		for _, q := range []string{"needle", "haystack 7", "word3", "word96"} {
			all = append(all, keys(searchSessions(t, x, SessionQuery{Query: q, Limit: 50}))...)
		}
		return all
	}
	want := search()
	before := residentKiB(t, dir)
	if before == 0 {
		t.Fatal("no resident pages of the index's files after searching it")
	}
	must(t, x.ReleaseMapped())
	if after := residentKiB(t, dir); after >= before {
		t.Fatalf("resident KiB of the index's files: %d before the release, %d after", before, after)
	}
	if got := search(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the release: %v, want %v", got, want)
	}
	must(t, x.Close())
	if err := x.ReleaseMapped(); err == nil {
		t.Fatal("release on a closed index: no error")
	}
}
