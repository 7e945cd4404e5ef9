package toolservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/microhost"
)

// Client calls dsh-tools over NATS as one calling session. It is what a
// harness (or the MCP adapter) uses; it needs no access to the trusted
// query API.
type Client struct {
	nc     *nats.Conn
	caller string
	// workspace, when set, names a workspace caller instead of a session.
	workspace string
	timeout   time.Duration
	// minGen, when set, is sent as Dsh-Min-Generation.
	minGen *uint64
	// at is the binding whose subjects the calls go to.
	at binding
}

// NewClient returns a Client that calls as the session caller ("" sends no
// caller header, so every tool fails with SESSION_QUERY_TOOL_MISSING_AGENT).
func NewClient(nc *nats.Conn, caller string) *Client {
	return &Client{nc: nc, caller: caller, timeout: DefaultCallTimeout + 5*time.Second}
}

// NewWorkspaceClient returns a Client that calls as the workspace caller
// cwd (Dsh-Caller-Workspace): what dshq mcp --workspace uses.
func NewWorkspaceClient(nc *nats.Conn, cwd string) *Client {
	c := NewClient(nc, "")
	c.workspace = cwd
	return c
}

// InTenant returns a copy of c that calls on the tool subjects of tenant
// (dsh.tools.v1.tenant.<tenant>.<endpoint>): what a tenant's credential may
// publish on. The caller must then be one of the tenant's sessions.
func (c *Client) InTenant(tenant string) *Client {
	cc := *c
	cc.at = binding{tenant: tenant, tenanted: true}
	return &cc
}

// AtGeneration returns a copy of c whose calls are answered by a projection
// that has applied at least generation g (the harness's last append).
func (c *Client) AtGeneration(g uint64) *Client {
	cc := *c
	cc.minGen = &g
	return &cc
}

func (c *Client) request(ctx context.Context, endpoint string, body []byte, out any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	msg := nats.NewMsg(c.at.subject(endpoint))
	msg.Data = body
	if c.caller != "" {
		msg.Header.Set(CallerHeader, c.caller)
	}
	if c.workspace != "" {
		msg.Header.Set(WorkspaceHeader, c.workspace)
	}
	if c.minGen != nil {
		msg.Header.Set(MinGenerationHeader, strconv.FormatUint(*c.minGen, 10))
	}
	reply, err := c.nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return fmt.Errorf("%s: %w", endpoint, err)
	}
	var failed *dshq.Error
	if errors.As(microhost.DecodeError(reply), &failed) {
		// dsh-tools answers its own failures in the reply; an error header
		// is the host's, and reaches the model as a tool failure.
		return &dshq.Error{Code: dshq.CodeToolFailed, Message: fmt.Sprintf("%s: service error %s: %s", endpoint, failed.Code, failed.Message)}
	}
	if err := json.Unmarshal(reply.Data, out); err != nil {
		return fmt.Errorf("%s: decode reply: %w", endpoint, err)
	}
	return nil
}

// List returns the tools and the prompt section.
func (c *Client) List(ctx context.Context) (ListReply, error) {
	var l ListReply
	return l, c.request(ctx, EndpointList, []byte(`{}`), &l)
}

// Call runs one tool with the model's argument object and returns the reply
// as the service gave it (possibly a spill preview).
func (c *Client) Call(ctx context.Context, tool string, args json.RawMessage) (Reply, error) {
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	var r Reply
	return r, c.request(ctx, tool, args, &r)
}

// CallFull runs one tool and, when the reply spilled, reads the full text
// back with spill.read, so the result is never a preview.
func (c *Client) CallFull(ctx context.Context, tool string, args json.RawMessage) (Reply, error) {
	r, err := c.Call(ctx, tool, args)
	if err != nil || r.Spill == nil {
		return r, err
	}
	text, err := c.ReadSpill(ctx, r.Spill.ID)
	if err != nil {
		return Reply{}, err
	}
	return Reply{Text: text}, nil
}

// ReadSpill reads a spilled result completely.
func (c *Client) ReadSpill(ctx context.Context, id string) (string, error) {
	var b strings.Builder
	req := SpillReadRequest{ID: id}
	for {
		body, _ := json.Marshal(req)
		var raw json.RawMessage
		if err := c.request(ctx, EndpointSpillRead, body, &raw); err != nil {
			return "", err
		}
		var failed Reply
		if json.Unmarshal(raw, &failed) == nil && failed.IsError {
			code := dshq.CodeToolFailed
			if failed.Error != nil {
				code = failed.Error.Code
			}
			return "", &dshq.Error{Code: code, Message: strings.TrimPrefix(failed.Text, "Error: ")}
		}
		var p SpillPage
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", fmt.Errorf("spill.read: decode page: %w", err)
		}
		b.WriteString(p.Text)
		if p.NextOffset == nil {
			return b.String(), nil
		}
		if req.Offset != nil && *p.NextOffset <= *req.Offset {
			return "", fmt.Errorf("spill.read: offset did not advance")
		}
		req.Offset = p.NextOffset
	}
}
