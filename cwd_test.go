package dshq

import "testing"

func TestAbsoluteCwd(t *testing.T) {
	for cwd, want := range map[string]bool{
		"/home/u/proj": true, "/": true,
		`e:\Workspace\src\github\claude-code-log`: true, `C:\`: true, "C:/work": true,
		`\\server\share`: true, `\\server\share\proj`: true, `\\?\C:\long`: true,
		"": false, "proj": false, `e:`: false, `e:proj`: false, "1:/x": false,
		`\\`: false, `\\server`: false, `\\server\`: false, `\\\share`: false, `\x`: false,
		"{{cwd}}": false,
	} {
		if got := AbsoluteCwd(cwd); got != want {
			t.Errorf("AbsoluteCwd(%q) = %v, want %v", cwd, got, want)
		}
	}
}
