package web

import (
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestServeURLsAreAddressesPeopleCanOpen(t *testing.T) {
	hosts := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("192.168.1.20"), net.ParseIP("::1"),
		net.ParseIP("fe80::1"), net.ParseIP("2001:db8::5"), net.ParseIP("10.0.0.7")}
	for _, c := range []struct {
		name string
		addr *net.TCPAddr
		want []string
	}{
		{"a loopback bind is its own address", &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 4280},
			[]string{"http://127.0.0.1:4280/"}},
		{"an IPv6 loopback bind is bracketed", &net.TCPAddr{IP: net.ParseIP("::1"), Port: 4280},
			[]string{"http://[::1]:4280/"}},
		{"one interface's bind is that address", &net.TCPAddr{IP: net.ParseIP("192.168.1.20"), Port: 80},
			[]string{"http://192.168.1.20:80/"}},
		{"an open dual-stack bind is localhost, then the host's addresses without loopback and link-local",
			&net.TCPAddr{IP: net.IPv6unspecified, Port: 4281},
			[]string{"http://localhost:4281/", "http://192.168.1.20:4281/", "http://[2001:db8::5]:4281/", "http://10.0.0.7:4281/"}},
		{"an open IPv4 bind names IPv4 addresses only", &net.TCPAddr{IP: net.IPv4zero.To4(), Port: 4281},
			[]string{"http://localhost:4281/", "http://192.168.1.20:4281/", "http://10.0.0.7:4281/"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ServeURLs(c.addr, hosts); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// An open bind (the issue: "http://[::]:4281/") prints URLs that each
// reach this UI.
func TestAnOpenBindPrintsURLsThatAnswer(t *testing.T) {
	s := newStack(t, WithToken("t0ken"))
	l, err := Listen("0.0.0.0:0", s.ui)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Stop(); err != nil {
			t.Error(err)
		}
	})
	if !strings.HasPrefix(l.URL, "http://localhost:") || len(l.URLs) == 0 || l.URLs[0] != l.URL {
		t.Fatalf("URL %q, URLs %q", l.URL, l.URLs)
	}
	for _, u := range l.URLs {
		if strings.Contains(u, "[::]") || strings.Contains(u, "0.0.0.0") {
			t.Errorf("%s is no address to open", u)
			continue
		}
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Authorization", "Bearer t0ken")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("GET %s: %v", u, err)
			continue
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", u, res.StatusCode)
		}
	}
}
