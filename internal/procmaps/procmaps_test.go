package procmaps

import (
	"os"
	"runtime"
	"testing"
)

func TestParseLine(t *testing.T) {
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
		{"7f00c000-7f00a000 r--s 00000000 fd:01 1 /backwards", 0, 0, 0, "", false},
		{"Rss:                 4 kB", 0, 0, 0, "", false},
	} {
		start, end, ino, path, ok := ParseLine([]byte(c.line))
		if start != c.start || end != c.end || ino != c.ino || path != c.path || ok != c.ok {
			t.Errorf("%q: got %x %x %d %q %v", c.line, start, end, ino, path, ok)
		}
	}
}

// TestResidentKiB: this process's executable and anonymous memory are
// resident and named as classify names them.
func TestResidentKiB(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ResidentKiB(os.Getpid(), func(path string) string {
		if path == exe {
			return "exe"
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	if got["exe"] == 0 || got[""] == 0 || len(got) != 2 {
		t.Fatalf("resident KiB by name: %v, want exe and anonymous only", got)
	}
}
