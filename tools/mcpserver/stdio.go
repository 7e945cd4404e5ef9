package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
)

// answered is the server's stdio framing, between the SDK's newline-
// delimited JSON-RPC connection and the process's stdin and stdout:
//
//   - It lets the server answer what it read before its input ended: the
//     SDK's stdio connection closes at the end of input, dropping the replies
//     of requests still running, so a client that writes its requests and
//     closes stdin at once (echo '…' | dshq mcp) got no answer. It tracks the
//     ids of the requests it reads and, at the end of input, holds the end
//     back until a response to each has been written (or ctx ends).
//   - It keeps results within the protocol revision the session negotiated:
//     the SDK writes ttlMs and cacheScope (the caching hints of the
//     2026-07-28 revision, required there) on every list and read result,
//     also for a session that negotiated an earlier revision through
//     initialize, whose Result types have no such members. For those
//     sessions it drops them.
type answered struct {
	ctx context.Context
	in  io.Reader
	out io.Writer

	mu      sync.Mutex     // guards the fields below
	pending map[string]int // request ids read less answers written (>0: unanswered)
	// legacy is set once initialize negotiated a revision before
	// cachingRevision.
	legacy  bool
	inLine  []byte        // the input's partial last line
	outLine []byte        // the output's partial last line
	changed chan struct{} // signalled when an answer is written
	ended   bool          // the input ended; Read returns io.EOF
	newline bool          // the input ended inside a line: Read ends it
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
	ended, newline := a.ended, a.newline && len(p) > 0
	if newline {
		a.newline = false
	}
	a.mu.Unlock()
	switch {
	case newline:
		// The last request had no newline: the SDK's line reader needs one
		// to take it while the end is held back.
		p[0] = '\n'
		return 1, nil
	case ended:
		a.waitAnswered()
		return 0, io.EOF
	}
	n, err := a.in.Read(p)
	a.mu.Lock()
	a.inLine = eachLine(append(a.inLine, p[:n]...), func(line []byte) { a.track(line, +1) })
	if err == io.EOF {
		a.track(a.inLine, +1) // a last request without its newline
		a.newline = len(bytes.TrimSpace(a.inLine)) > 0
		a.inLine = nil
		a.ended = true
	}
	a.mu.Unlock()
	if err == io.EOF {
		if n > 0 {
			return n, nil // the bytes first; the end after the answers
		}
		return a.read(p)
	}
	return n, err
}

// write writes p, which the SDK writes as whole lines (one message and its
// newline per call); a line that must change is rewritten first.
func (a *answered) write(p []byte) (int, error) {
	a.mu.Lock()
	out := p
	if len(a.outLine) == 0 && bytes.HasSuffix(p, []byte{'\n'}) && bytes.IndexByte(p, '\n') == len(p)-1 {
		out = a.rewrite(p)
	}
	a.mu.Unlock()
	if _, err := a.out.Write(out); err != nil {
		return 0, err
	}
	a.mu.Lock()
	a.outLine = eachLine(append(a.outLine, p...), func(line []byte) { a.track(line, -1) })
	a.mu.Unlock()
	select {
	case a.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

// waitAnswered waits until every request read has been answered, or ctx
// ends.
func (a *answered) waitAnswered() {
	for {
		a.mu.Lock()
		done := true
		for _, n := range a.pending {
			done = done && n <= 0
		}
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
			if a.pending[id]++; a.pending[id] == 0 {
				delete(a.pending, id)
			}
		case dir < 0 && m.Method == "" && (m.Result != nil || m.Error != nil):
			// The SDK may answer a request before its newline is read (its
			// decoder stops at the closing brace): the count goes below 0
			// until the request is counted.
			if a.pending[id]--; a.pending[id] == 0 {
				delete(a.pending, id)
			}
		}
	}
}

// cachingRevision is the MCP revision that added ttlMs and cacheScope to the
// results of the cacheable methods (the lists, resources/read).
const cachingRevision = "2026-07-28"

// rewrite returns the line to write for line. An initialize result's
// protocolVersion says which revision the session negotiated; on one before
// cachingRevision a result loses ttlMs and cacheScope. Results are told
// apart by their members, not by the request they answer: the SDK may answer
// a request before answered has read its newline. The caller holds mu.
func (a *answered) rewrite(line []byte) []byte {
	isInit := bytes.Contains(line, []byte(`"protocolVersion"`))
	if !isInit && !(a.legacy && bytes.Contains(line, []byte(`"ttlMs"`))) {
		return line
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(line, &msg) != nil || msg["result"] == nil {
		return line
	}
	var result map[string]json.RawMessage
	if json.Unmarshal(msg["result"], &result) != nil {
		return line
	}
	if v := result["protocolVersion"]; v != nil && result["serverInfo"] != nil {
		var version string
		if json.Unmarshal(v, &version) == nil {
			a.legacy = version < cachingRevision // revisions are dates, YYYY-MM-DD
		}
		return line
	}
	if !a.legacy || result["ttlMs"] == nil || result["cacheScope"] == nil {
		return line
	}
	delete(result, "ttlMs")
	delete(result, "cacheScope")
	r, err1 := json.Marshal(result)
	msg["result"] = r
	out, err2 := json.Marshal(msg)
	if err1 != nil || err2 != nil {
		return line
	}
	return append(out, '\n')
}
