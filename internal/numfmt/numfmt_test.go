package numfmt

import "testing"

func TestThousands(t *testing.T) {
	for _, c := range []struct {
		in   int64
		want string
	}{
		{0, "0"}, {999, "999"}, {1000, "1,000"}, {1234567, "1,234,567"},
		{-1234, "-1,234"}, {-999, "-999"}, {-9223372036854775808, "-9,223,372,036,854,775,808"},
	} {
		if got := Thousands(c.in); got != c.want {
			t.Errorf("Thousands(%d) = %q, want %q", c.in, got, c.want)
		}
	}
}
