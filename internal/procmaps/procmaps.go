// Package procmaps reads a Linux process's memory maps (/proc/PID/maps and
// /proc/PID/smaps): which file each map is of, and how much of it is
// resident.
package procmaps

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// ParseLine reads one line of /proc/PID/maps (or a map's header line in
// smaps): "start-end perms offset dev inode path", the path padded with
// spaces and possibly ending in " (deleted)". ok is false for any other
// line, and for a map of no file.
func ParseLine(l []byte) (start, end uintptr, ino uint64, path string, ok bool) {
	var f [5][]byte
	rest := l
	for i := range f {
		rest = bytes.TrimLeft(rest, " ")
		j := bytes.IndexByte(rest, ' ')
		if j < 0 {
			return 0, 0, 0, "", false
		}
		f[i], rest = rest[:j], rest[j:]
	}
	path = string(bytes.TrimSuffix(bytes.TrimLeft(rest, " "), []byte(" (deleted)")))
	lo, hi, cut := bytes.Cut(f[0], []byte("-"))
	s, err1 := strconv.ParseUint(string(lo), 16, 64)
	e, err2 := strconv.ParseUint(string(hi), 16, 64)
	n, err3 := strconv.ParseUint(string(f[4]), 10, 64)
	if !cut || err1 != nil || err2 != nil || err3 != nil || e <= s || path == "" {
		return 0, 0, 0, "", false
	}
	return uintptr(s), uintptr(e), n, path, true
}

// ResidentKiB sums the resident size of process pid's maps (/proc/PID/smaps)
// by the name classify gives each map: its file's path, or "" for a map of
// no file (anonymous memory). Maps classify names "" are left out when they
// are of a file.
func ResidentKiB(pid int, classify func(path string) string) (map[string]int, error) {
	smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	name, counted := "", false
	for _, l := range bytes.Split(smaps, []byte("\n")) {
		f := bytes.Fields(l)
		if len(f) >= 5 && bytes.IndexByte(f[0], '-') > 0 && !bytes.HasSuffix(f[0], []byte(":")) {
			path := ""
			if _, _, _, p, ok := ParseLine(l); ok {
				path = p
			}
			name = classify(path)
			counted = name != "" || path == ""
			continue
		}
		if counted && len(f) == 3 && string(f[0]) == "Rss:" {
			kb, err := strconv.Atoi(string(f[1]))
			if err != nil {
				return nil, fmt.Errorf("/proc/%d/smaps: %q: %w", pid, l, err)
			}
			out[name] += kb
		}
	}
	return out, nil
}
