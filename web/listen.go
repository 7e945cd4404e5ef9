package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"
)

// DefaultAddr is where `dshq serve` and `dshq ui` serve the UI: loopback
// only.
const DefaultAddr = "127.0.0.1:4280"

// Listening is a UI being served; Stop ends it.
type Listening struct {
	// URL is the UI's address (http://host:port/) as a browser opens it:
	// the bound address, or for an open bind (0.0.0.0, [::]) the loopback
	// name localhost, never the unspecified address.
	URL string
	// URLs are the addresses the UI answers on: URL first, then for an
	// open bind this host's other addresses (ServeURLs).
	URLs []string
	srv  *http.Server
	ui   *Server
	done chan error
}

// Listen serves ui on addr in a goroutine that Stop ends. It refuses a
// non-loopback addr when ui has no token (CheckBind).
func Listen(addr string, ui *Server) (*Listening, error) {
	if err := CheckBind(addr, ui.token); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           ui,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second, // live streams clear it
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(ui.log.Handler(), slog.LevelWarn),
	}
	urls := ServeURLs(ln.Addr().(*net.TCPAddr), hostAddrs())
	l := &Listening{URL: urls[0], URLs: urls, srv: srv, ui: ui, done: make(chan error, 1)}
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		l.done <- err
	}()
	return l, nil
}

// Stop ends the live streams, then shuts the server down (waiting at most
// 5 s for pages being served) and returns the server's failure, if any.
func (l *Listening) Stop() error {
	l.ui.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := l.srv.Shutdown(ctx)
	if err != nil {
		_ = l.srv.Close()
	}
	return errors.Join(err, <-l.done)
}

// ServeURLs returns the URLs a listener bound to addr answers on, as people
// open them: the bound address itself, or for an unspecified address
// (0.0.0.0, [::]: every interface) http://localhost:PORT/ first, then one
// URL per address of hosts that is neither loopback nor link-local (IPv4
// only for a bind that takes IPv4 only), in the order given.
func ServeURLs(addr *net.TCPAddr, hosts []net.IP) []string {
	port := strconv.Itoa(addr.Port)
	if !addr.IP.IsUnspecified() {
		return []string{"http://" + net.JoinHostPort(addr.IP.String(), port) + "/"}
	}
	urls := []string{"http://" + net.JoinHostPort("localhost", port) + "/"}
	v4only := addr.IP.To4() != nil
	for _, ip := range hosts {
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() || (v4only && ip.To4() == nil) {
			continue
		}
		urls = append(urls, "http://"+net.JoinHostPort(ip.String(), port)+"/")
	}
	return urls
}

// hostAddrs returns the addresses of this host's interfaces (none when
// they cannot be read).
func hostAddrs() []net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			ips = append(ips, n.IP)
		}
	}
	return ips
}
