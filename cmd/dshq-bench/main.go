// Command dshq-bench runs dshq's end-to-end benchmark (`make bench`): one
// generated corpus through the real pipeline, every figure printed beside
// its reference measured in the same run (raw JetStream, raw Bleve, a
// SQLite FTS5 implementation of the original design), then issue 28's
// targets, each met or missed.
//
//	dshq-bench                        # default corpus, aligned table
//	dshq-bench -sessions 2000 -json   # larger corpus, JSON report
//	dshq-bench -serve=false           # without the dshq serve phase
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof" // served only with -pprof
	"os"
	"os/signal"
	"syscall"

	"github.com/dshq/dshq/bench"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "dshq-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dshq-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.Config
	fs.IntVar(&cfg.Corpus.Sessions, "sessions", bench.DefaultSessions, "sessions in the generated corpus")
	fs.IntVar(&cfg.Corpus.Turns, "turns", bench.DefaultTurns, "turns per session (each ~12 events; a compaction every 3 turns)")
	fs.Uint64Var(&cfg.Corpus.Seed, "seed", 1, "corpus seed")
	fs.IntVar(&cfg.SampleSessions, "sample-sessions", bench.DefaultSampleSessions, "sessions (the corpus's last) written through the measured ingest; the rest are bulk-loaded first")
	fs.IntVar(&cfg.BulkWriters, "bulk-writers", bench.DefaultBulkWriters, "concurrent importers of the bulk load (sync relaxed)")
	fs.IntVar(&cfg.Writers, "writers", bench.DefaultWriters, "concurrent harness writers during ingest")
	fs.IntVar(&cfg.Samples, "samples", bench.DefaultSamples, "measured calls per latency figure but the search classes'")
	fs.IntVar(&cfg.SearchSamples, "search-samples", bench.DefaultSearchSamples, "measured calls of each search class (their tails are targets: measure them over at least 1000)")
	fs.IntVar(&cfg.AppendSamples, "append-samples", bench.DefaultAppendSamples, "appends per batch size and sync policy")
	fs.StringVar(&cfg.Dir, "dir", "", "working directory (default: a temporary one, removed after)")
	fs.BoolVar(&cfg.ApplyOnly, "apply-only", false, "measure only the projector's apply (catch-up of the bulk) beside raw Bleve on the same documents, then stop")
	fs.StringVar(&cfg.Dshq, "dshq", "", "the dshq binary of the serve phase (default: go build it into the working directory)")
	serve := fs.Bool("serve", true, "run the dshq serve phase: the whole corpus published into a dshq serve process, its peak RSS and home size by part")
	fs.BoolVar(&cfg.ServeOnly, "serve-only", false, "run only the dshq serve phase")
	fs.StringVar(&cfg.ServePprof, "serve-pprof", "", "pass --pprof HOST:PORT to dshq serve, to profile it during the serve phase")
	fs.StringVar(&cfg.SearchTrace, "search-trace", "", "write an execution trace (go tool trace) of the search classes to this file; each dshq sample is a region named after its class")
	fs.StringVar(&cfg.SearchTraceClass, "search-trace-class", "", "with -search-trace: trace only the search classes whose name contains this (e.g. rare)")
	settle := fs.Bool("settle", true, "wait for the Bleve indexes' background merges to finish before the query latencies (steady state; -settle=false measures during them)")
	tails := fs.Bool("tails", true, "probe each dshq sample of the search classes (outside its timing) and print what overlapped the slowest 1% of them")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this address during the run (e.g. 127.0.0.1:6060), to profile a phase")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: dshq-bench [flags]\n\nexample: dshq-bench -sessions 400 -turns 5\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	cfg.NoServe, cfg.NoTailProbes, cfg.NoSettle = !*serve, !*tails, !*settle
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *pprofAddr != "" {
		ln, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			return fmt.Errorf("-pprof: %w", err)
		}
		srv := &http.Server{Handler: http.DefaultServeMux}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		fmt.Fprintf(stderr, "dshq-bench: pprof on http://%s/debug/pprof/\n", ln.Addr())
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteTable(stdout)
}
