// Command harnesssim is the end-to-end tests' harness: a process that writes
// sessions through the harness SDK (bus.Store) the way a real harness does —
// a root session with a turn, a tool call, English and Chinese text, a title
// and a summarising compaction; a fork of it (isSeeded, inheritedEventCount,
// parentSession); a subagent (origin subagent, delegationDepth 1); and bulk
// sessions of several turns — then writes what it wrote to a JSON facts file
// (package simfacts) for the test to check the services against.
//
//	harnesssim --nats-url URL [--user U --password P] [--inbox-prefix P]
//	           [--tenant T] --index N --facts FILE [--bulk N] [--turns N] [--gate]
//
// With --tenant it writes as that tenant (bus.WithTenant, on
// dsh.log.<tenant>.>), with the tenant's inbox prefix unless --inbox-prefix
// says otherwise.
//
// With --gate it prints "gate" after the root session and waits for a line
// on stdin before writing the rest, so that a test can act while it writes.
// It prints "done" when everything is written and the facts file is saved.
//
// With --crash it writes only one session, <sim>-crash, whose turn stays
// open on an unanswered tool call, saves the facts, prints "open" and holds
// the session's write lease until it is killed — a harness that crashes
// mid-turn.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/record"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "harnesssim:", err)
		os.Exit(1)
	}
}

type options struct {
	url, user, password, inbox string
	tenant                     string
	index, bulk, turns         int
	facts, idPrefix            string
	gate, crash                bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("harnesssim", flag.ContinueOnError)
	fs.StringVar(&o.url, "nats-url", nats.DefaultURL, "NATS server URL")
	fs.StringVar(&o.user, "user", "", "NATS user")
	fs.StringVar(&o.password, "password", "", "NATS password")
	fs.StringVar(&o.inbox, "inbox-prefix", "", "private inbox prefix (default: the tenant's, _INBOX_<tenant>)")
	fs.StringVar(&o.tenant, "tenant", "", "write as this tenant (dsh.log.<tenant>.>)")
	fs.IntVar(&o.index, "index", 0, "simulator number (0..7): names its workspace, ids and phrases")
	fs.IntVar(&o.bulk, "bulk", 4, "number of bulk sessions")
	fs.IntVar(&o.turns, "turns", 4, "turns per bulk session")
	fs.StringVar(&o.facts, "facts", "", "write the facts JSON here (required)")
	fs.StringVar(&o.idPrefix, "id-prefix", "", "prefix of every session id (to run again on the same stream)")
	fs.BoolVar(&o.gate, "gate", false, `print "gate" after the root session and wait for a line on stdin`)
	fs.BoolVar(&o.crash, "crash", false, `write one session with an open turn, print "open" and hold it until killed`)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.facts == "":
		return o, errors.New("--facts is required")
	case o.index < 0 || o.index >= len(zhPrefix):
		return o, fmt.Errorf("--index must be in 0..%d", len(zhPrefix)-1)
	case o.bulk < 0 || o.turns < 1:
		return o, errors.New("--bulk must be >= 0 and --turns >= 1")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	opts := []nats.Option{nats.Name(fmt.Sprintf("harnesssim-%d", o.index))}
	if o.user != "" {
		opts = append(opts, nats.UserInfo(o.user, o.password))
	}
	if o.inbox == "" && o.tenant != "" {
		o.inbox = bus.TenantInboxPrefix(o.tenant)
	}
	if o.inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(o.inbox))
	}
	nc, err := nats.Connect(o.url, opts...)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer nc.Close()
	var storeOpts []bus.Option
	if o.tenant != "" {
		storeOpts = append(storeOpts, bus.WithTenant(o.tenant))
	}
	store, err := bus.NewStore(ctx, nc, storeOpts...)
	if err != nil {
		return err
	}
	s := newSim(o.index, o.idPrefix)
	if o.crash {
		return s.crashMidTurn(ctx, store, o.facts, stdout)
	}
	if err := s.write(ctx, store, s.root()); err != nil {
		return err
	}
	if o.gate {
		fmt.Fprintln(stdout, "gate")
		if _, err := bufio.NewReader(stdin).ReadString('\n'); err != nil {
			return fmt.Errorf("wait at the gate: %w", err)
		}
	}
	plans := []*plan{s.fork(), s.subagent()}
	for k := range o.bulk {
		plans = append(plans, s.bulkSession(k, o.turns))
	}
	for _, p := range plans {
		if err := s.write(ctx, store, p); err != nil {
			return err
		}
	}
	if err := s.saveFacts(o.facts); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "done")
	return nil
}

func (s *sim) saveFacts(path string) error {
	b, err := json.Marshal(s.facts)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// crashMidTurn writes the open-turn session, flushes it, saves the facts,
// prints "open" and holds the write handle (and its lease heartbeat) until
// the process ends.
func (s *sim) crashMidTurn(ctx context.Context, store *bus.Store, facts string, stdout io.Writer) error {
	p := s.openTurn()
	h, err := store.Create(ctx, p.header)
	if err != nil {
		return err
	}
	defer h.Close(context.Background())
	events := make([]dshq.Event, len(p.batches[0]))
	for i, raw := range p.batches[0] {
		if events[i], err = record.ParseEvent(raw); err != nil {
			return err
		}
	}
	if _, err := h.Append(ctx, events); err != nil {
		return err
	}
	if err := h.Flush(ctx); err != nil {
		return err
	}
	hdr, err := record.EncodeHeader(dshq.HeaderRecord{Header: p.header, FormatVersion: dshq.FormatVersion2})
	if err != nil {
		return err
	}
	p.facts.Header, p.facts.Events = hdr, p.batches[0]
	s.facts.Sessions = append(s.facts.Sessions, p.facts)
	if err := s.saveFacts(facts); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "open")
	<-ctx.Done()
	return nil
}

// write creates the session of p and appends its events turn by turn (each
// turn is one Append, as a harness flushes after a turn), then records it.
func (s *sim) write(ctx context.Context, store *bus.Store, p *plan) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var opts []bus.CreateOption
	if p.header.IsSeeded {
		opts = append(opts, bus.WithInheritedEventCount(p.inherited))
	}
	h, err := store.Create(ctx, p.header, opts...)
	if err != nil {
		return fmt.Errorf("create %s: %w", p.header.ID, err)
	}
	for _, batch := range p.batches {
		events := make([]dshq.Event, len(batch))
		for i, raw := range batch {
			if events[i], err = record.ParseEvent(raw); err != nil {
				_ = h.Close(ctx)
				return fmt.Errorf("%s: event %s: %w", p.header.ID, raw, err)
			}
		}
		if _, err := h.Append(ctx, events); err != nil {
			_ = h.Close(ctx)
			return fmt.Errorf("append to %s: %w", p.header.ID, err)
		}
	}
	if err := h.Flush(ctx); err != nil {
		_ = h.Close(ctx)
		return fmt.Errorf("flush %s: %w", p.header.ID, err)
	}
	if err := h.Close(ctx); err != nil {
		return fmt.Errorf("close %s: %w", p.header.ID, err)
	}
	hdr, err := record.EncodeHeader(dshq.HeaderRecord{Header: p.header, FormatVersion: dshq.FormatVersion2, InheritedEventCount: p.inherited})
	if err != nil {
		return err
	}
	p.facts.Header = hdr
	for _, batch := range p.batches {
		p.facts.Events = append(p.facts.Events, batch...)
	}
	s.facts.Sessions = append(s.facts.Sessions, p.facts)
	return nil
}
