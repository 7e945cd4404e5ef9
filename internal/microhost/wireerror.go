package microhost

import (
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/dshq/dshq"
)

// MaxMessageBytes bounds the message of an error reply: a longer one is cut
// (at a character boundary, marked "…"), so that an error reply always fits
// a message whatever a failure quotes. Messages quote untrusted values
// through dshq.Quote and stay far below it; this is the last guard.
const MaxMessageBytes = 4 << 10

// EncodeError returns the wire form of a failure
// (docs/protocol.md#3-the-trusted-query-api): the micro error headers
// Nats-Service-Error-Code: <code> and Nats-Service-Error: <message> (control
// characters blanked, so that any message fits a header), and the body
// {"error":{"code","message"}}; the message cut to MaxMessageBytes.
func EncodeError(e *dshq.Error) (nats.Header, []byte) {
	msg := Bound(e.Message, MaxMessageBytes)
	body, _ := json.Marshal(dshq.ErrorReply{Error: dshq.ErrorBody{Code: e.Code, Message: msg}})
	h := nats.Header{}
	h.Set(micro.ErrorCodeHeader, headerText(Bound(string(e.Code), 128)))
	h.Set(micro.ErrorHeader, headerText(msg))
	return h, body
}

// Bound returns s cut to at most n bytes at a character boundary, ending in
// "…" when it was cut.
func Bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// DecodeError returns the *dshq.Error a reply carries, or nil for a success.
// The body's message is preferred to the header's, which cannot hold every
// character.
func DecodeError(msg *nats.Msg) error {
	code := msg.Header.Get(micro.ErrorCodeHeader)
	if code == "" {
		return nil
	}
	e := &dshq.Error{Code: dshq.Code(code), Message: msg.Header.Get(micro.ErrorHeader)}
	var body dshq.ErrorReply
	if json.Unmarshal(msg.Data, &body) == nil && body.Error.Message != "" {
		e.Message = body.Error.Message
	}
	return e
}

// headerText makes a message safe for a header value.
func headerText(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if s == "" {
		s = "error"
	}
	return s
}

// InBody returns the error a Handler returns for a failure its service
// answers in its own reply shape: body is sent as a normal reply (no error
// headers), and the request counts as failed with err's code in the
// service's statistics. dsh-tools answers every failure this way
// (docs/protocol.md#4-the-model-facing-tools).
func InBody(body []byte, err *dshq.Error) error { return &inBody{body: body, err: err} }

type inBody struct {
	body []byte
	err  *dshq.Error
}

func (e *inBody) Error() string { return e.err.Error() }
func (e *inBody) Unwrap() error { return e.err }

// asInBody reports whether err is an InBody answer.
func asInBody(err error) (*inBody, bool) {
	var ib *inBody
	ok := errors.As(err, &ib)
	return ib, ok
}
