// Package toolservice serves the five model-facing tools as the NATS micro
// service dsh-tools (docs/protocol.md#4-the-model-facing-tools): one endpoint
// per tool on dsh.tools.v1.<tool>, the tool list on dsh.tools.v1.list, and the
// spill reader on dsh.tools.v1.spill.read. The caller is the session named by
// the Dsh-Caller-Session header, set by the trusted harness; the body is the
// model's argument object.
//
// Every endpoint is served for tenants too, on
// dsh.tools.v1.tenant.<tenant>.<endpoint>
// (docs/protocol.md#4-the-model-facing-tools): the server lets only that
// tenant's credential publish there, and the caller the header names must be
// one of the tenant's sessions (package tenancy, tools.Caller.InTenant), so
// a tenant's credential cannot choose another tenant's identity. Every answer
// is a normal reply:
//
//	{"text":"…","isError":false}
//	{"text":"Error: <safe message>","isError":true,"error":{"code":"<CODE>"}}
//
// A rendering larger than the connection's payload limit is never cut in
// place: the full text goes to a JetStream object store (DSH_SPILL, TTL at
// least ten minutes), and the reply carries a bounded preview, a locator line
// and {"spill":{"id","bytes"}}; spill.read pages the full text for the same
// caller only.
package toolservice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/authz"
	"github.com/dshq/dshq/internal/microhost"
	"github.com/dshq/dshq/tenancy"
	"github.com/dshq/dshq/tools"
)

// Names of the service and its subjects.
const (
	// CallerHeader names the calling session; only the trusted harness sets it.
	CallerHeader = "Dsh-Caller-Session"
	// WorkspaceHeader (an addition) names a workspace caller instead: an
	// absolute cwd, set by whoever configured the calling harness (dshq mcp
	// --workspace), never by the model (tools.AsWorkspace).
	WorkspaceHeader = "Dsh-Caller-Workspace"
	// MinGenerationHeader (optional, an addition to the contract,
	// docs/protocol.md#4-the-model-facing-tools) asks that the call be answered
	// by a projection that has applied at least this stream sequence: the
	// harness's last append, for read-your-writes.
	MinGenerationHeader = "Dsh-Min-Generation"
	// EndpointList and EndpointSpillRead are the non-tool endpoints.
	EndpointList      = "list"
	EndpointSpillRead = "spill.read"
)

// Spill defaults.
const (
	// DefaultSpillTTL keeps spilled results past the contract's ten minutes.
	DefaultSpillTTL = 15 * time.Minute
	// DefaultCallTimeout bounds one tool call: the search timeout plus the
	// title and preflight reads around it.
	DefaultCallTimeout = tools.DefaultSearchTimeout + 15*time.Second
)

// CodeSpillNotFound is the failure of spill.read for an unknown, expired or
// foreign spill id (the three are one answer).
const CodeSpillNotFound dshq.Code = "SESSION_QUERY_TOOL_SPILL_NOT_FOUND"

// maxInFlight bounds concurrent calls of one service instance.
const maxInFlight = 64

// Option configures Serve.
type Option func(*config)

type config struct {
	bucket      string
	ttl         time.Duration
	maxPayload  int
	callTimeout time.Duration
	replicas    int
	log         *slog.Logger
	registerer  prometheus.Registerer
}

// WithSpillBucket names the object store bucket of spilled results.
func WithSpillBucket(name string) Option { return func(c *config) { c.bucket = name } }

// WithSpillTTL sets how long spilled results live (at least ten minutes).
func WithSpillTTL(d time.Duration) Option { return func(c *config) { c.ttl = d } }

// WithMaxPayload sets the reply size above which a rendering spills (default:
// the connection's maximum payload).
func WithMaxPayload(n int) Option { return func(c *config) { c.maxPayload = n } }

// WithCallTimeout bounds one tool call (default DefaultCallTimeout).
func WithCallTimeout(d time.Duration) Option { return func(c *config) { c.callTimeout = d } }

// WithSpillReplicas sets the spill bucket's replica count (default 1). On a
// cluster it should match the session stream's: a bucket on one server
// fails every spilling call while that server is down.
func WithSpillReplicas(n int) Option { return func(c *config) { c.replicas = n } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// Reply is the body of every tool answer.
type Reply struct {
	Text    string     `json:"text"`
	IsError bool       `json:"isError"`
	Error   *ErrorInfo `json:"error,omitempty"`
	Spill   *SpillRef  `json:"spill,omitempty"`
}

// ErrorInfo names a failure's code.
type ErrorInfo struct {
	Code dshq.Code `json:"code"`
}

// SpillRef locates a spilled full result.
type SpillRef struct {
	ID    string `json:"id"`
	Bytes int    `json:"bytes"`
}

// ListReply is the body of dsh.tools.v1.list.
type ListReply struct {
	Tools  []tools.Definition `json:"tools"`
	Prompt string             `json:"prompt"`
}

// SpillReadRequest is the body of dsh.tools.v1.spill.read.
type SpillReadRequest struct {
	ID     string `json:"id"`
	Offset *int64 `json:"offset,omitempty"`
}

// SpillPage is one page of a spilled result.
type SpillPage struct {
	Text       string `json:"text"`
	NextOffset *int64 `json:"nextOffset,omitempty"`
}

type server struct {
	cfg     config
	tools   *tools.Tools
	store   jetstream.ObjectStore
	metrics *metrics // nil without WithRegisterer
}

// Serve starts dsh-tools on nc over t. It creates (or updates) the spill
// bucket. stop drains the endpoints and waits for calls in flight.
func Serve(ctx context.Context, nc *nats.Conn, t *tools.Tools, opts ...Option) (stop func() error, err error) {
	cfg := config{bucket: dshq.SpillBucket, ttl: DefaultSpillTTL, maxPayload: int(nc.MaxPayload()),
		callTimeout: DefaultCallTimeout, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.ttl < 10*time.Minute {
		return nil, fmt.Errorf("spill TTL %v is below the contract's ten minutes", cfg.ttl)
	}
	if cfg.maxPayload < 4096 {
		return nil, fmt.Errorf("max payload %d is too small to answer", cfg.maxPayload)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	store, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: cfg.bucket, TTL: cfg.ttl, Description: "dsh-tools spilled results", Replicas: cfg.replicas})
	if err != nil {
		return nil, fmt.Errorf("spill bucket %s: %w", cfg.bucket, err)
	}
	m, err := newMetrics(cfg.registerer)
	if err != nil {
		return nil, err
	}
	s := &server{cfg: cfg, tools: t, store: store, metrics: m}
	return s.serve(ctx, nc)
}

func (s *server) serve(ctx context.Context, nc *nats.Conn) (func() error, error) {
	var eps []microhost.Endpoint
	// Each endpoint is served on the trusted subject and on every tenant's.
	add := func(endpoint string, answer func(ctx context.Context, msg *nats.Msg, b binding) any) {
		handler := func(ctx context.Context, msg *nats.Msg) ([]byte, error) { return answered(s.bind(ctx, msg, answer)) }
		eps = append(eps,
			microhost.Endpoint{Name: endpoint, Subject: dshq.ToolsSubjectPrefix + "." + endpoint, Handler: handler},
			microhost.Endpoint{Name: "tenant_" + endpoint, Subject: tenancy.ToolSubjectPattern(endpoint), Handler: handler})
	}
	for _, d := range tools.Definitions() {
		name := d.Name
		add(name, func(ctx context.Context, msg *nats.Msg, b binding) any { return s.call(ctx, name, msg, b) })
	}
	list := ListReply{Tools: tools.Definitions(), Prompt: tools.Prompt}
	add(EndpointList, func(context.Context, *nats.Msg, binding) any { return list })
	add(EndpointSpillRead, s.spillRead)
	svc, err := microhost.Start(ctx, nc, microhost.Config{
		Name:        dshq.ToolsService,
		Description: "model-facing session tools",
		MaxInFlight: maxInFlight,
		Logger:      s.cfg.log,
		Stopping:    inBody(errorReply(dshq.CodeAborted, "session query was cancelled")),
		Panicked:    inBody(errorReply(dshq.CodeToolFailed, "session query operation failed")),
	}, eps)
	if err != nil {
		return nil, err
	}
	return svc.Stop, nil
}

// bind answers msg as the binding of its subject says. A request on a
// tenant's subject whose tenant is not a tenant name binds no caller.
func (s *server) bind(ctx context.Context, msg *nats.Msg, answer func(context.Context, *nats.Msg, binding) any) any {
	b, ok := bindingOf(msg.Subject)
	if !ok {
		return errorReply(dshq.CodeToolMissingAgent, authz.MsgMissingAgent)
	}
	return answer(ctx, msg, b)
}

// answered encodes a reply; an error reply is answered the same way (the
// tools answer every failure in their reply shape) and counted as failed.
func answered(v any) ([]byte, error) {
	if r, ok := v.(Reply); ok && r.IsError {
		return nil, inBody(r)
	}
	return marshal(v), nil
}

// inBody is the microhost answer of an error reply.
func inBody(r Reply) error {
	code := dshq.CodeToolFailed
	if r.Error != nil {
		code = r.Error.Code
	}
	return microhost.InBody(marshal(r), &dshq.Error{Code: code, Message: strings.TrimPrefix(r.Text, "Error: ")})
}

func errorReply(code dshq.Code, msg string) Reply {
	return Reply{Text: "Error: " + msg, IsError: true, Error: &ErrorInfo{Code: code}}
}

// marshal encodes without HTML escaping (the text is for a model, not HTML).
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only our own reply types are encoded; they always marshal.
		panic(fmt.Sprintf("encode reply: %v", err))
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// call runs one tool and spills an oversized rendering.
func (s *server) call(ctx context.Context, name string, r *nats.Msg, b binding) any {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.callTimeout)
	defer cancel()
	caller, workspace := r.Header.Get(CallerHeader), r.Header.Get(WorkspaceHeader)
	if caller != "" && workspace != "" {
		return errorReply(dshq.CodeInvalidRequest, CallerHeader+" and "+WorkspaceHeader+" do not go together: name one caller")
	}
	by := tools.AsSession(caller)
	if workspace != "" {
		by = tools.AsWorkspace(workspace)
	}
	by = b.bind(by)
	if g := r.Header.Get(MinGenerationHeader); g != "" {
		n, err := strconv.ParseUint(g, 10, 64)
		if err != nil {
			return errorReply(dshq.CodeInvalidRequest, MinGenerationHeader+" must be a non-negative integer")
		}
		by = by.AtGeneration(n)
	}
	start := time.Now()
	res, err := s.tools.Call(ctx, by, name, r.Data)
	s.metrics.observe(name, start, res, err)
	if err != nil {
		return errorReply(dshq.CodeAborted, "session query was cancelled")
	}
	if res.IsError {
		return errorReply(res.Code, microhost.Bound(strings.TrimPrefix(res.Text, "Error: "), microhost.MaxMessageBytes))
	}
	reply := Reply{Text: res.Text}
	if len(marshal(reply)) <= s.limit() {
		return reply
	}
	spilled, err := s.spill(ctx, b, caller, workspace, res.Text)
	if err != nil {
		s.cfg.log.Warn("spill failed", "tool", name, "err", err)
		return errorReply(dshq.CodeToolFailed, "session query operation failed")
	}
	return spilled
}

// limit is the largest reply body: the payload limit less room for headers.
func (s *server) limit() int { return s.cfg.maxPayload - 1024 }

// spill stores text for caller or workspace (of binding b) and returns the
// preview reply.
func (s *server) spill(ctx context.Context, b binding, caller, workspace, text string) (Reply, error) {
	id := nuid.Next()
	meta := jetstream.ObjectMeta{Name: id, Metadata: map[string]string{"caller": caller, "workspace": workspace, "tenant": b.tenant}}
	if _, err := s.store.Put(ctx, meta, strings.NewReader(text)); err != nil {
		return Reply{}, fmt.Errorf("put %s: %w", id, err)
	}
	locator := fmt.Sprintf("\n[full result: %d bytes; read it with %s id=%s]", len(text), b.subject(EndpointSpillRead), id)
	ref := &SpillRef{ID: id, Bytes: len(text)}
	for n := min(len(text), s.limit()); ; n /= 2 {
		reply := Reply{Text: prefix(text, n) + locator, Spill: ref}
		if len(marshal(reply)) <= s.limit() || n == 0 {
			return reply, nil
		}
	}
}

// spillID reports whether id can name a spill: spill ids are nuids, 22
// characters of [0-9A-Za-z].
func spillID(id string) bool {
	if len(id) != 22 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// prefix returns at most n bytes of s, cut at a character boundary.
func prefix(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// spillRead pages a spilled result for the caller that produced it, on the
// subjects (trusted, or the same tenant's) it was produced on.
func (s *server) spillRead(ctx context.Context, r *nats.Msg, b binding) any {
	caller, workspace := r.Header.Get(CallerHeader), r.Header.Get(WorkspaceHeader)
	if caller == "" && workspace == "" {
		return errorReply(dshq.CodeToolMissingAgent, authz.MsgNoCaller)
	}
	if caller != "" && workspace != "" {
		return errorReply(dshq.CodeInvalidRequest, CallerHeader+" and "+WorkspaceHeader+" do not go together: name one caller")
	}
	var req SpillReadRequest
	dec := json.NewDecoder(bytes.NewReader(r.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.ID == "" {
		return errorReply(dshq.CodeInvalidArgs, "invalid arguments: expected {\"id\": string, \"offset\"?: non-negative integer}")
	}
	notFound := errorReply(CodeSpillNotFound, "spilled result was not found or has expired")
	if !spillID(req.ID) {
		// No spill has it; checked before it names an object (whose
		// subjects an over-long name would break).
		return notFound
	}
	info, err := s.store.GetInfo(ctx, req.ID)
	if err != nil || info.Metadata["caller"] != caller || info.Metadata["workspace"] != workspace || info.Metadata["tenant"] != b.tenant {
		if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			s.cfg.log.Warn("spill info", "err", err)
		}
		return notFound
	}
	data, err := s.store.GetBytes(ctx, req.ID)
	if err != nil {
		s.cfg.log.Warn("spill read", "err", err)
		return notFound
	}
	var off int64
	if req.Offset != nil {
		off = *req.Offset
	}
	if off < 0 || off > int64(len(data)) || (off < int64(len(data)) && !utf8.RuneStart(data[off])) {
		return errorReply(dshq.CodeInvalidArgs, "invalid arguments: offset must be a character boundary within the result")
	}
	rest := string(data[off:])
	for n := min(len(rest), s.limit()); ; n /= 2 {
		page := SpillPage{Text: prefix(rest, n)}
		if end := off + int64(len(page.Text)); end < int64(len(data)) {
			page.NextOffset = &end
		}
		if len(marshal(page)) <= s.limit() || n == 0 {
			return page
		}
	}
}
