// Package mcpserver is the core of `dshq mcp`: an MCP server over stdio that
// exposes the five session tools to any MCP client. Its caller is the session
// named by DSH_SESSION_ID in its own environment (set by the trusted harness
// for its shell children), or, without it, the workspace its configuration
// names (Config.Workspace: Claude Code and Codex, which say no session, see
// their workspace's history); never an argument. With neither, every call
// fails with SESSION_QUERY_TOOL_MISSING_AGENT. It reaches a running dshq over NATS,
// either running the tools itself over the trusted query API (the default)
// or calling the dsh-tools service as that caller (ViaToolService), and
// always returns the full text to the client.
//
// The CLI's subcommand is one call:
//
//	cfg := mcpserver.ConfigFromEnv(os.Getenv, natsURL)
//	err := mcpserver.Run(ctx, os.Stdin, os.Stdout, cfg)
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/authz"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/tools"
	"github.com/dshq/dshq/tools/toolservice"
)

// EnvSessionID is the environment variable naming the calling session.
const EnvSessionID = "DSH_SESSION_ID"

// Version is the server version announced to clients.
const Version = "1.0.0"

// Config configures Run.
type Config struct {
	// NATSURL is the NATS server of a running dshq (used when Conn is nil).
	NATSURL string
	// NATSOptions are extra connect options (credentials, TLS).
	NATSOptions []nats.Option
	// Conn, when set, is used instead of dialing NATSURL; Run does not close it.
	Conn *nats.Conn
	// SessionID is the caller session. Without it, Workspace is the
	// caller; with neither, every call fails with
	// SESSION_QUERY_TOOL_MISSING_AGENT.
	SessionID string
	// Workspace, used when SessionID is "", makes the caller a workspace
	// (tools.AsWorkspace): the sessions whose cwd is exactly this
	// absolute directory, chosen by whoever configured the MCP client
	// (dshq mcp --workspace), never by the model.
	Workspace string
	// ViaToolService calls the dsh-tools service (on its trusted subjects)
	// instead of running the tools over the query API.
	ViaToolService bool
	// Tenant, when set, calls the dsh-tools service on that tenant's tool
	// subjects (a tenant's credential reaches nothing else): it implies
	// ViaToolService, and the caller must be one of the tenant's sessions.
	Tenant string
	// ToolOptions configure the in-process tools (max results, timeout).
	ToolOptions []tools.Option
	// Logger receives diagnostics (default: discard). Never stdout: that is
	// the protocol stream.
	Logger *slog.Logger
}

// ConfigFromEnv returns a Config whose caller is DSH_SESSION_ID from getenv
// (os.Getenv in the CLI).
func ConfigFromEnv(getenv func(string) string, natsURL string) Config {
	return Config{NATSURL: natsURL, SessionID: strings.TrimSpace(getenv(EnvSessionID))}
}

// caller runs one tool and returns the full result; err only when ctx ended.
type caller func(ctx context.Context, name string, args json.RawMessage) (tools.Result, error)

// Run serves MCP on in/out until the client disconnects or ctx ends. When
// in ends, the requests already read are answered before Run returns.
func Run(ctx context.Context, in io.Reader, out io.Writer, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	nc := cfg.Conn
	if nc == nil {
		var err error
		opts := append([]nats.Option{nats.Name("dshq-mcp")}, cfg.NATSOptions...)
		if nc, err = nats.Connect(cfg.NATSURL, opts...); err != nil {
			return fmt.Errorf("connect to %s: %w", cfg.NATSURL, err)
		}
		defer nc.Close()
	}
	call, err := newCaller(nc, cfg)
	if err != nil {
		return err
	}
	if cfg.SessionID == "" && cfg.Workspace == "" {
		cfg.Logger.Warn(EnvSessionID + " is not set: every tool call fails with " + string(dshq.CodeToolMissingAgent))
	}
	call = explainCaller(call, cfg)
	server := newServer(call, cfg.Logger)
	a := newAnswered(ctx, in, out)
	t := &mcp.IOTransport{Reader: io.NopCloser(a.reader()), Writer: nopWriteCloser{a.writer()}}
	if err := server.Run(ctx, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("mcp: %w", err)
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func newCaller(nc *nats.Conn, cfg Config) (caller, error) {
	workspace := cfg.SessionID == "" && cfg.Workspace != ""
	if cfg.ViaToolService || cfg.Tenant != "" {
		c := toolservice.NewClient(nc, cfg.SessionID)
		if workspace {
			c = toolservice.NewWorkspaceClient(nc, cfg.Workspace)
		}
		if cfg.Tenant != "" {
			c = c.InTenant(cfg.Tenant)
		}
		return func(ctx context.Context, name string, args json.RawMessage) (tools.Result, error) {
			r, err := c.CallFull(ctx, name, args)
			if ctx.Err() != nil {
				return tools.Result{}, context.Cause(ctx)
			}
			if err != nil {
				cfg.Logger.Warn("dsh-tools call failed", "tool", name, "err", err)
				return tools.Result{Text: "Error: session query operation failed", IsError: true, Code: dshq.CodeToolFailed}, nil
			}
			res := tools.Result{Text: r.Text, IsError: r.IsError}
			if r.Error != nil {
				res.Code = r.Error.Code
			}
			return res, nil
		}, nil
	}
	opts := append([]tools.Option{tools.WithLogger(cfg.Logger)}, cfg.ToolOptions...)
	tl, err := tools.New(tools.FromQueryClient(query.NewClient(nc)), opts...)
	if err != nil {
		return nil, err
	}
	if workspace {
		return func(ctx context.Context, name string, args json.RawMessage) (tools.Result, error) {
			return tl.Call(ctx, tools.AsWorkspace(cfg.Workspace), name, args)
		}, nil
	}
	return func(ctx context.Context, name string, args json.RawMessage) (tools.Result, error) {
		return tl.Call(ctx, tools.AsSession(cfg.SessionID), name, args)
	}, nil
}

// explainCaller makes a missing-agent failure say which it is in the terms
// of this process's environment, to the model (the result's text) and to
// the operator (a warning on the logger): DSH_SESSION_ID unset, or naming
// no stored session. The code stays SESSION_QUERY_TOOL_MISSING_AGENT.
func explainCaller(call caller, cfg Config) caller {
	return func(ctx context.Context, name string, args json.RawMessage) (tools.Result, error) {
		r, err := call(ctx, name, args)
		if err != nil || r.Code != dshq.CodeToolMissingAgent || cfg.SessionID == "" && cfg.Workspace != "" {
			return r, err
		}
		if cfg.SessionID == "" {
			r.Text = "Error: " + authz.MsgMissingAgent + ": " + EnvSessionID + " is not set in the environment of dshq mcp"
			return r, nil
		}
		r.Text = "Error: " + authz.MsgMissingAgent + ": " + EnvSessionID + " names no stored session (or one not projected yet)"
		cfg.Logger.Warn("the caller session is not stored", "tool", name, "env", EnvSessionID, "session", cfg.SessionID)
		return r, nil
	}
}

// newServer returns an MCP server exposing the five tools through call, with
// the tools' prompt section as its instructions.
func newServer(call caller, log *slog.Logger) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "dshq", Version: Version},
		&mcp.ServerOptions{Instructions: tools.Prompt, Logger: log})
	for _, d := range tools.Definitions() {
		name := d.Name
		s.AddTool(&mcp.Tool{Name: name, Description: d.Description, InputSchema: d.InputSchema},
			func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
				defer func() {
					if p := recover(); p != nil { // a bug: answer, never crash the server
						log.Error("tool call panicked", "tool", name, "panic", fmt.Sprint(p))
						res, err = errorResult(dshq.CodeToolFailed, "Error: session query operation failed"), nil
					}
				}()
				args := req.Params.Arguments
				if len(args) == 0 || string(args) == "null" {
					args = json.RawMessage(`{}`)
				}
				r, err := call(ctx, name, args)
				if err != nil {
					return nil, err
				}
				if r.IsError {
					return errorResult(r.Code, r.Text), nil
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: r.Text}}}, nil
			})
	}
	return s
}

// errorResult is a tool failure: the "Error: …" text, and {name, code} as
// structured content (the original's structured error info).
func errorResult(code dshq.Code, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		IsError:           true,
		StructuredContent: map[string]string{"name": "SessionQueryToolError", "code": string(code)},
	}
}
