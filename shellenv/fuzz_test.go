package shellenv

import (
	"strings"
	"testing"
)

// FuzzChildEnv checks the merge's invariants on arbitrary parent
// environments: no inherited secret or DSH_ key survives, the managed
// values always win, and every entry is KEY=VALUE with a unique key.
//
//	go test -run '^$' -fuzz FuzzChildEnv -parallel=1 -fuzztime 30s ./shellenv
func FuzzChildEnv(f *testing.F) {
	f.Add("PATH=/bin\nDSH_HOME=/old\nGITHUB_TOKEN=x\nTERM=xterm", "DSH_HOME", "/home/u/.dsh")
	f.Add("dsh_x=1\n=\nA=1\nA=2", "DSH_SESSION_ID", "s")
	f.Fuzz(func(t *testing.T, parent, dshKey, dshVal string) {
		if dshKey == "" || strings.Contains(dshKey, "=") {
			dshKey = "DSH_SHELL"
		}
		env := ChildEnv(strings.Split(parent, "\n"), nil, map[string]string{dshKey: dshVal})
		seen := map[string]bool{}
		for _, kv := range env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				t.Fatalf("malformed entry %q", kv)
			}
			if seen[k] {
				t.Fatalf("duplicate key %q", k)
			}
			seen[k] = true
			if k == dshKey {
				if v != dshVal {
					t.Fatalf("managed %s=%q displaced by %q", k, dshVal, v)
				}
				continue
			}
			if strings.HasPrefix(strings.ToUpper(k), "DSH_") || sensitive.MatchString(k) {
				t.Fatalf("inherited key %q leaked", k)
			}
		}
	})
}
