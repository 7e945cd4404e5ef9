package microhost

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/dshq/dshq"
)

// EncodeError returns the wire form of a failure
// (docs/protocol.md#3-the-trusted-query-api): the micro error headers
// Nats-Service-Error-Code: <code> and Nats-Service-Error: <message> (control
// characters blanked, so that any message fits a header), and the body
// {"error":{"code","message"}}.
func EncodeError(e *dshq.Error) (nats.Header, []byte) {
	body, _ := json.Marshal(dshq.ErrorReply{Error: dshq.ErrorBody{Code: e.Code, Message: e.Message}})
	h := nats.Header{}
	h.Set(micro.ErrorCodeHeader, string(e.Code))
	h.Set(micro.ErrorHeader, headerText(e.Message))
	return h, body
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
