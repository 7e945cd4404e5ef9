package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
)

// answered lets a server answer what it read before its input ended: the
// SDK's stdio connection closes at the end of input, dropping the replies
// of requests still running, so a client that writes its requests and
// closes stdin at once (echo '…' | dshq mcp) got no answer. in tracks the
// ids of the requests it reads and, at the end of input, holds the end back
// until out has written a response to each of them (or ctx ends).
type answered struct {
	ctx context.Context
	in  io.Reader
	out io.Writer

	mu      sync.Mutex     // guards pending and the line buffers
	pending map[string]int // request ids read and not yet answered
	inLine  []byte         // the input's partial last line
	outLine []byte         // the output's partial last line
	changed chan struct{}  // signalled when an answer is written
	ended   bool           // the input ended; Read returns io.EOF
}

func newAnswered(ctx context.Context, in io.Reader, out io.Writer) *answered {
	return &answered{ctx: ctx, in: in, out: out, pending: map[string]int{}, changed: make(chan struct{}, 1)}
}

// reader is the input side.
func (a *answered) reader() io.Reader { return readerFunc(a.read) }

// writer is the output side.
func (a *answered) writer() io.Writer { return writerFunc(a.write) }

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func (a *answered) read(p []byte) (int, error) {
	a.mu.Lock()
	ended := a.ended
	a.mu.Unlock()
	if ended {
		return 0, io.EOF
	}
	n, err := a.in.Read(p)
	a.mu.Lock()
	a.inLine = eachLine(append(a.inLine, p[:n]...), func(line []byte) { a.track(line, +1) })
	if err == io.EOF {
		a.track(a.inLine, +1) // a last request without its newline
		a.inLine = nil
		a.ended = true
	}
	a.mu.Unlock()
	if err == io.EOF {
		if n > 0 {
			return n, nil // the bytes first; the end after the answers
		}
		a.waitAnswered()
		return 0, io.EOF
	}
	return n, err
}

func (a *answered) write(p []byte) (int, error) {
	n, err := a.out.Write(p)
	a.mu.Lock()
	a.outLine = eachLine(append(a.outLine, p[:n]...), func(line []byte) { a.track(line, -1) })
	a.mu.Unlock()
	select {
	case a.changed <- struct{}{}:
	default:
	}
	return n, err
}

// waitAnswered waits until every request read has been answered, or ctx
// ends.
func (a *answered) waitAnswered() {
	for {
		a.mu.Lock()
		done := len(a.pending) == 0
		a.mu.Unlock()
		if done {
			return
		}
		select {
		case <-a.changed:
		case <-a.ctx.Done():
			return
		}
	}
}

// eachLine calls fn with every complete line of b and returns the rest.
func eachLine(b []byte, fn func([]byte)) []byte {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return b
		}
		fn(b[:i])
		b = b[i+1:]
	}
}

// message is what answered reads of a JSON-RPC message.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// track counts the requests of an input line (dir +1) or the responses of
// an output line (dir -1), batches included. The caller holds mu.
func (a *answered) track(line []byte, dir int) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var msgs []message
	if line[0] == '[' {
		if json.Unmarshal(line, &msgs) != nil {
			return
		}
	} else {
		var m message
		if json.Unmarshal(line, &m) != nil {
			return
		}
		msgs = []message{m}
	}
	for _, m := range msgs {
		if len(m.ID) == 0 || string(m.ID) == "null" {
			continue
		}
		id := string(m.ID)
		switch {
		case dir > 0 && m.Method != "":
			a.pending[id]++
		case dir < 0 && m.Method == "" && (m.Result != nil || m.Error != nil):
			if a.pending[id]--; a.pending[id] <= 0 {
				delete(a.pending, id)
			}
		}
	}
}
