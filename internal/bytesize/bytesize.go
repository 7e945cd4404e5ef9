// Package bytesize parses and prints byte sizes for command-line flags:
// "1GiB", "512MiB", "64KiB" (binary units), "2GB", "500MB", "10kB" (decimal
// units), a plain number of bytes, or -1 for "no limit".
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes; it implements flag.Value (and the Type method
// of spf13/pflag's Value).
type Size int64

// units maps a suffix (lowercase) to its multiplier.
var units = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40},
	{"b", 1},
}

// Parse parses s: a number with an optional unit, or -1.
func Parse(s string) (Size, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "-1" {
		return -1, nil
	}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, fmt.Errorf("size %q: want a number of bytes with an optional unit (KiB, MiB, GiB, kB, MB, GB), or -1", s)
	}
	v := n * float64(mult)
	if v > math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return Size(v), nil
}

// String prints the size in the largest binary unit that divides it.
func (s Size) String() string {
	switch {
	case s < 0:
		return "-1"
	case s == 0:
		return "0"
	}
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if int64(s)%u.mult == 0 {
			return strconv.FormatInt(int64(s)/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10)
}

// Set parses v into s (flag.Value).
func (s *Size) Set(v string) error {
	n, err := Parse(v)
	if err != nil {
		return err
	}
	*s = n
	return nil
}

// Type names the flag's value type in help (pflag.Value).
func (s *Size) Type() string { return "size" }
