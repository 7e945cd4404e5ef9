package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ContentSecurityPolicy is the policy of every answer: only the UI's own
// scripts, styles and images; no inline script, no inline style, no
// eval; the one HTML sink the live script writes to goes through the
// Trusted Types policy "dshq"; no framing, no plugins, no base or form
// target elsewhere.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types dshq"

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), interest-cohort=()")
}

// cookieName holds the proof of the token.
const cookieName = "dshq_ui"

// ErrTokenRequired is returned by CheckBind for a non-loopback address
// without a token.
var ErrTokenRequired = fmt.Errorf("web UI: a non-loopback address needs a token (--http-token or DSH_HTTP_TOKEN), or bind to loopback behind a proxy that authenticates")

// CheckBind refuses to serve on a non-loopback address without a token: the
// UI shows every workspace's sessions to whoever reaches it. Loopback is
// 127.0.0.0/8, ::1 or "localhost"; an empty host or 0.0.0.0 is every
// interface.
func CheckBind(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("web UI address %q: %w", addr, err)
	}
	if token == "" && !isLoopbackHost(host) {
		return fmt.Errorf("%w: %s", ErrTokenRequired, addr)
	}
	return nil
}

// isLoopbackHost reports whether host (no port) names only this machine.
func isLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// cookieValue is what the cookie holds: a MAC of the token, so the token
// itself is never stored in the browser.
func (s *Server) cookieValue() string {
	m := hmac.New(sha256.New, []byte(s.token))
	m.Write([]byte("dshq-ui-cookie-v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// authorize admits the request or answers it. Without a token only
// loopback Host names are served (DNS rebinding); with one, the request
// presents it (Bearer header, a ?token= link that sets the cookie and
// redirects to the URL without it, or the cookie).
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) bool {
	if s.token == "" {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !isLoopbackHost(host) {
			s.fail(w, r, &httpError{status: http.StatusMisdirectedRequest, title: "Wrong host",
				msg: "This dshq UI serves only loopback addresses (localhost, 127.0.0.1, [::1]). To serve it to other machines, give it a token (--http-token)."})
			return false
		}
		return true
	}
	if strings.HasPrefix(r.URL.Path, "/static/") {
		return true
	}
	if auth := r.Header.Get("Authorization"); strings.HasPrefix(auth, "Bearer ") && s.tokenMatches(strings.TrimPrefix(auth, "Bearer ")) {
		return true
	}
	if t := r.URL.Query().Get("token"); t != "" && s.tokenMatches(t) {
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.cookieValue(), Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"})
		q := r.URL.Query()
		q.Del("token")
		u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return false
	}
	if c, err := r.Cookie(cookieName); err == nil && subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.cookieValue())) == 1 {
		return true
	}
	s.fail(w, r, &httpError{status: http.StatusUnauthorized, title: "Token required",
		msg: "This dshq UI needs its token. Open it once as …/?token=<token> (the value of --http-token or DSH_HTTP_TOKEN), or send Authorization: Bearer <token>."})
	return false
}

func (s *Server) tokenMatches(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) == 1
}
