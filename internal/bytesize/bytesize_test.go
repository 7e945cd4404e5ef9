package bytesize

import "testing"

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Size
	}{
		{"0", 0}, {"4096", 4096}, {"-1", -1},
		{"1GiB", 1 << 30}, {"512MiB", 512 << 20}, {"64KiB", 64 << 10}, {"1.5GiB", 3 << 29},
		{"2GB", 2e9}, {"500MB", 5e8}, {"10kB", 1e4}, {"1g", 1 << 30}, {"16 MiB", 16 << 20}, {"100b", 100},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "GiB", "-2", "1XB", "ten", "1e400", "-1GiB", "NaN"} {
		if got, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %d, want an error", bad, got)
		}
	}
}

func TestStringRoundTrips(t *testing.T) {
	for _, s := range []Size{0, -1, 1 << 30, 128 << 20, 3 << 29, 1000, 1 << 40} {
		got, err := Parse(s.String())
		if err != nil || got != s {
			t.Errorf("Parse(%q) = %d, %v; want %d", s.String(), got, err, s)
		}
	}
	if got := Size(1 << 30).String(); got != "1GiB" {
		t.Errorf("1 GiB prints %q", got)
	}
}
