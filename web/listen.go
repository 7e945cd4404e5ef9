package web

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// DefaultAddr is where `dshq serve` and `dshq ui` serve the UI: loopback
// only.
const DefaultAddr = "127.0.0.1:4280"

// Listening is a UI being served; Stop ends it.
type Listening struct {
	// URL is the UI's address (http://host:port/).
	URL  string
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
	l := &Listening{URL: "http://" + ln.Addr().String() + "/", srv: srv, ui: ui, done: make(chan error, 1)}
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
