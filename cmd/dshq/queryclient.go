package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/admin"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
)

// queryFlags are the consistency flags of every query command.
type queryFlags struct {
	minGeneration uint64
	timeoutMs     int
}

func (q *queryFlags) add(cmd *cobra.Command) {
	cmd.Flags().Uint64Var(&q.minGeneration, "min-generation", 0, "answer only once the projection has applied this generation (read your writes; import prints it)")
	cmd.Flags().IntVar(&q.timeoutMs, "timeout-ms", dshq.DefaultTimeoutMs, "how long the service may wait for --min-generation (1..30000)")
}

func (q *queryFlags) opts() []query.CallOption {
	opts := []query.CallOption{query.WithTimeoutMs(q.timeoutMs)}
	if q.minGeneration > 0 {
		opts = append(opts, query.WithMinGeneration(q.minGeneration))
	}
	return opts
}

// withClient dials and runs fn with a query client. When the service
// answered (a reply, or an error of its own) and the projection is catching
// up with the stream, it says so on stderr: the answer may be incomplete.
func (g *globals) withClient(ctx context.Context, fn func(c *query.Client) error) error {
	nc, err := g.dial()
	if err != nil {
		return err
	}
	defer nc.Close()
	err = fn(query.NewClient(nc))
	if err == nil || dshq.ErrorCode(err) != "" {
		g.noteCatchingUp(ctx, nc)
	}
	return err
}

// catchingUpWait bounds the status request behind a read's answer.
const catchingUpWait = 2 * time.Second

// noteCatchingUp writes "catching up: generation X of Y" on stderr (a JSON
// object with --json) when the projector says it is working off a backlog.
// A deployment without a reachable dsh-admin says nothing.
func (g *globals) noteCatchingUp(ctx context.Context, nc *nats.Conn) {
	ctx, cancel := context.WithTimeout(ctx, catchingUpWait)
	defer cancel()
	st, err := admin.NewClient(nc).Status(ctx)
	if err != nil || !st.CatchingUp {
		return
	}
	if g.json {
		b, _ := json.Marshal(map[string]any{"catchingUp": map[string]uint64{"generation": st.Generation, "streamLastSeq": st.StreamLastSeq}})
		fmt.Fprintf(g.stderr, "%s\n", b)
		return
	}
	fmt.Fprintln(g.stderr, "dshq:", catchingUpLine(st.Generation, st.StreamLastSeq))
}

// catchingUpLine is the note of a projection at generation gen of a stream
// whose last sequence is last.
func catchingUpLine(gen, last uint64) string {
	return fmt.Sprintf("catching up: generation %d of %d (answers may be incomplete until the projection has caught up)", gen, last)
}

// checkSessionID refuses an id no session can have (the service would
// answer that no such session exists); what names it the error.
func checkSessionID(what, id string) error {
	if err := record.ValidateSessionID(id); err != nil {
		return fmt.Errorf("%s %q is not a session id: %w", what, id, err)
	}
	return nil
}
