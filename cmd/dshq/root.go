package main

import (
	"fmt"
	"io"

	"github.com/nats-io/nats.go"
	"golang.org/x/term"

	"github.com/spf13/cobra"

	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/node"
	"github.com/dshq/dshq/record"
)

// globals are the flags every client command shares.
type globals struct {
	conn natsconn.Options
	// tenant is the tenant the credential belongs to (--tenant), "" for none.
	tenant string
	json   bool
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// getenv reads the environment (os.Getenv; tests replace it).
	getenv func(string) string
}

// defaultNATSURL is where `dshq serve` listens by default.
const defaultNATSURL = "nats://" + node.DefaultListen

func newRootCmd(getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := &cobra.Command{
		Use:   "dshq",
		Short: "dshq — a shared, searchable session corpus for AI-agent harnesses",
		Long: `dshq keeps the session logs of AI-agent harnesses in NATS JetStream, folds them
into surfaces, lineage and provenance (bbolt) and a full-text index (Bleve), and
answers search, trace and read requests — for people, programs and the models
themselves (through the MCP server).

Start everything on this machine with 'dshq serve'; the other commands talk to
a running dshq over NATS (--nats-url, default ` + defaultNATSURL + `).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	pf := root.PersistentFlags()
	pf.StringVar(&g.conn.URL, "nats-url", envOr(getenv, "DSH_NATS_URL", defaultNATSURL), "NATS server URL (env DSH_NATS_URL)")
	pf.StringVar(&g.conn.Creds, "creds", "", "NATS credentials file")
	pf.StringVar(&g.conn.NKey, "nkey", "", "NATS NKey seed file")
	pf.StringVar(&g.conn.User, "user", "", "NATS user")
	pf.StringVar(&g.conn.Password, "password", getenv("DSH_NATS_PASSWORD"), "NATS password (env DSH_NATS_PASSWORD)")
	pf.StringVar(&g.conn.Token, "token", getenv("DSH_NATS_TOKEN"), "NATS token (env DSH_NATS_TOKEN)")
	pf.StringVar(&g.conn.TLSCA, "tls-ca", "", "CA certificate to trust for TLS")
	pf.StringVar(&g.conn.TLSCert, "tls-cert", "", "client certificate for mutual TLS")
	pf.StringVar(&g.conn.TLSKey, "tls-key", "", "client key for mutual TLS")
	pf.BoolVar(&g.json, "json", false, "print JSON for scripts instead of text")
	pf.StringVar(&g.tenant, "tenant", getenv("DSH_TENANT"), "the tenant whose credential this is (env DSH_TENANT): inbox _INBOX_<tenant>, its log subjects (import, export), its tool subjects (mcp)")

	root.AddCommand(newServeCmd(g), newImportCmd(g), newExportCmd(g), newSearchCmd(g), newTraceCmd(g),
		newReadCmd(g), newTailCmd(g), newRebuildCmd(g), newStatsCmd(g), newEnvCmd(g), newMCPCmd(g), newUICmd(g), newWatchCmd(g),
		newTenantCmd(g), newRestoreCmd(g), newUsageCmd(g))
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &codedError{code: CodeUsage, err: err} })
	usageArgs(root)
	return root
}

// usageArgs makes the argument errors of cmd's subcommands, at any depth,
// CodeUsage errors.
func usageArgs(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		if args := c.Args; args != nil {
			c.Args = func(cmd *cobra.Command, a []string) error {
				if err := args(cmd, a); err != nil {
					return &codedError{code: CodeUsage, err: err}
				}
				return nil
			}
		}
		usageArgs(c)
	}
}

// dial connects to the NATS deployment of the global flags. An unreachable
// server is one clear line.
func (g *globals) dial() (*nats.Conn, error) {
	o := g.conn
	if err := natsconn.CheckURL(o.URL); err != nil {
		return nil, usageErrorf("--nats-url: %v", err)
	}
	o.Name = "dshq-cli"
	if g.tenant != "" {
		if err := record.ValidateTenant(g.tenant); err != nil {
			return nil, fmt.Errorf("--tenant: %w", err)
		}
		o.InboxPrefix = bus.TenantInboxPrefix(g.tenant)
	}
	nc, err := natsconn.Connect(o)
	if err != nil {
		return nil, &codedError{code: CodeUnavailable, err: fmt.Errorf("%w (is dshq serve running? --nats-url or DSH_NATS_URL say where)", err)}
	}
	return nc, nil
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// isTerminalFd reports whether fd is a terminal.
func isTerminalFd(fd uintptr) bool { return term.IsTerminal(int(fd)) }
