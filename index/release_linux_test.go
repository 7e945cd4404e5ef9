//go:build linux

package index

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// residentKiB sums the resident size of this process's maps of files under
// dir (/proc/self/smaps).
func residentKiB(t *testing.T, dir string) int {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in, kib := false, 0
	for _, l := range strings.Split(string(smaps), "\n") {
		if _, _, _, path, ok := parseMapsLine([]byte(l)); ok {
			in = strings.HasPrefix(path, dir)
			continue
		}
		if f := strings.Fields(l); in && len(f) == 3 && f[0] == "Rss:" {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			kib += n
		}
	}
	return kib
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

func TestParseMapsLine(t *testing.T) {
	for _, c := range []struct {
		line       string
		start, end uintptr
		ino        uint64
		path       string
		ok         bool
	}{
		{"7f00a000-7f00c000 r--s 00000000 fd:01 1234    /d/000000000001.zap", 0x7f00a000, 0x7f00c000, 1234, "/d/000000000001.zap", true},
		{"7f00a000-7f00c000 r--s 00000000 fd:01 99 /a dir/with spaces.zap (deleted)", 0x7f00a000, 0x7f00c000, 99, "/a dir/with spaces.zap", true},
		{"7f00a000-7f00c000 rw-p 00000000 00:00 0 ", 0, 0, 0, "", false},
		{"7f00a000-7f00c000 rw-p 00000000 00:00 0", 0, 0, 0, "", false},
		{"zz-7f00c000 r--s 00000000 fd:01 1 /x", 0, 0, 0, "", false},
		{"Rss:                 4 kB", 0, 0, 0, "", false},
	} {
		start, end, ino, path, ok := parseMapsLine([]byte(c.line))
		if start != c.start || end != c.end || ino != c.ino || path != c.path || ok != c.ok {
			t.Errorf("%q: got %x %x %d %q %v", c.line, start, end, ino, path, ok)
		}
	}
}
