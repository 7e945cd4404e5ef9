// Command dshq-interop is the Go side of @dshq/harness's interop tests and
// benchmark (clients/ts, docs/sdk.md#typescript-dshqharness): it writes and reads
// sessions through the Go SDK (package bus), races a Go writer against a
// TypeScript one for one session, expands upstream JSONL files as dshq
// import reads them, and measures the Go SDK's append figures. It is a test
// program, not a dshq command.
//
//	dshq-interop write   -url U [-tenant T -user U -password P]   stdin: {"header":…,"inheritedEventCount":n} then one event per line
//	dshq-interop read    -url U -id ID [...]                       the events through a read handle, one raw record per line
//	dshq-interop records -url U -id ID [...]                       Store.Records, one raw record per line
//	dshq-interop race    -url U -id ID [...]                       Create when stdin says "go"; prints owned or the error's name; Close at stdin's end
//	dshq-interop own     -url U -id ID [...]                       open for writing, append one event, print ok; Close at stdin's end
//	dshq-interop expand  -fixture-cwd DIR FILE...                  per file one JSON line {file,id,header,inheritedEventCount,events} or {file,error}
//	dshq-interop bench   -url U -n N                               the Go SDK's append → acknowledged and append → searchable, one JSON line
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/bus"
	"github.com/dshq/dshq/query"
	"github.com/dshq/dshq/record"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: dshq-interop write|read|records|race|expand|bench [flags]")
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	url := fs.String("url", "", "NATS URL")
	tenant := fs.String("tenant", "", "tenant")
	user := fs.String("user", "", "NATS user")
	password := fs.String("password", "", "NATS password")
	id := fs.String("id", "", "session id")
	fixtureCwd := fs.String("fixture-cwd", "", "substitute {{cwd}} with this directory")
	n := fs.Int("n", 200, "bench: appends measured")
	retry := fs.Bool("retry", false, "race, own: retry while the session is held elsewhere (up to 20 s)")
	_ = fs.Parse(args)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	switch cmd {
	case "expand":
		err = expand(*fixtureCwd, fs.Args())
	default:
		var nc *nats.Conn
		var store *bus.Store
		nc, store, err = open(ctx, *url, *tenant, *user, *password)
		if err != nil {
			break
		}
		defer nc.Close()
		switch cmd {
		case "write":
			err = write(ctx, store)
		case "read":
			err = read(ctx, store, *id)
		case "records":
			err = records(ctx, store, *id)
		case "race":
			err = race(ctx, store, *id, *retry)
		case "own":
			err = own(ctx, store, *id, *retry)
		case "bench":
			err = bench(ctx, nc, store, *n)
		default:
			err = fmt.Errorf("unknown command %q", cmd)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dshq-interop:", err)
		os.Exit(1)
	}
}

func open(ctx context.Context, url, tenant, user, password string) (*nats.Conn, *bus.Store, error) {
	opts := bus.ConnectOptions()
	if user != "" {
		opts = append(opts, nats.UserInfo(user, password))
	}
	var sopts []bus.Option
	if tenant != "" {
		opts = append(opts, nats.CustomInboxPrefix(bus.TenantInboxPrefix(tenant)))
		sopts = append(sopts, bus.WithTenant(tenant))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, err
	}
	store, err := bus.NewStore(ctx, nc, sopts...)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, store, nil
}

// write creates a session from stdin and appends its events in one batch.
func write(ctx context.Context, store *bus.Store) error {
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	if !sc.Scan() {
		return errors.New("no header line")
	}
	var first struct {
		Header    dshq.Header `json:"header"`
		Inherited *int64      `json:"inheritedEventCount"`
	}
	if err := json.Unmarshal(sc.Bytes(), &first); err != nil {
		return err
	}
	var copts []bus.CreateOption
	if first.Inherited != nil {
		copts = append(copts, bus.WithInheritedEventCount(*first.Inherited))
	}
	h, err := store.Create(ctx, first.Header, copts...)
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	var events []dshq.Event
	for sc.Scan() {
		events = append(events, dshq.Event{Raw: append([]byte(nil), sc.Bytes()...)})
	}
	if err := sc.Err(); err != nil {
		return err
	}
	gen, err := h.Append(ctx, events)
	if err != nil {
		return err
	}
	if err := h.Flush(ctx); err != nil {
		return err
	}
	fmt.Println(gen)
	return nil
}

func read(ctx context.Context, store *bus.Store, id string) error {
	h, err := store.Open(ctx, id, bus.Read)
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	evs, err := h.Read(ctx, 0, -1)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	for _, e := range evs {
		w.Write(e.Raw)
		w.WriteByte('\n')
	}
	return w.Flush()
}

func records(ctx context.Context, store *bus.Store, id string) error {
	recs, err := store.Records(ctx, id)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	for _, r := range recs {
		w.Write(r.Data)
		w.WriteByte('\n')
	}
	return w.Flush()
}

// race creates id when stdin says go, reports the outcome by the error's
// seam name, and holds what it won until stdin ends.
func race(ctx context.Context, store *bus.Store, id string, retry bool) error {
	in := bufio.NewScanner(os.Stdin)
	fmt.Println("ready")
	if !in.Scan() {
		return nil
	}
	h, err := held(retry, bus.ErrAlreadyExists, func() (*bus.Handle, error) {
		return store.Create(ctx, dshq.Header{Version: 2, ID: id, CreatedAt: time.Now().UnixMilli(), Cwd: dshq.Str("/race")})
	})
	switch {
	case err == nil:
		// Materialised, so the loser's view is the stored session too.
		if err := h.Flush(ctx); err != nil {
			return err
		}
		fmt.Println("owned")
	case errors.Is(err, bus.ErrAlreadyExists):
		fmt.Println("SessionAlreadyExistsError")
	case errors.Is(err, bus.ErrAlreadyOwned):
		fmt.Println("SessionAlreadyOwnedError")
	default:
		return err
	}
	for in.Scan() {
	}
	if h != nil {
		return h.Close(ctx)
	}
	return nil
}

// held calls take, and with retry calls it again while it fails with
// kind, for up to 20 s (a poll: the test frees the session meanwhile).
func held(retry bool, kind error, take func() (*bus.Handle, error)) (*bus.Handle, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		h, err := take()
		if !retry || !errors.Is(err, kind) || time.Now().After(deadline) {
			return h, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// own opens id for writing, appends one user message at its next seq,
// prints ok, and holds the session until stdin ends.
func own(ctx context.Context, store *bus.Store, id string, retry bool) error {
	h, err := held(retry, bus.ErrAlreadyOwned, func() (*bus.Handle, error) { return store.Open(ctx, id, bus.Write) })
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	seq := h.NextSeq()
	raw := fmt.Sprintf(`{"type":"user/message","seq":%d,"time":1,"data":{"id":"go-%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"from Go"}]},"surfaceOp":"append"}`, seq, seq)
	if _, err := h.Append(ctx, []dshq.Event{{Raw: []byte(raw)}}); err != nil {
		return err
	}
	fmt.Println("ok")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
	}
	return nil
}

// expand reads each file as dshq import does (record.ReadAll, the fixture
// placeholders substituted with the id import derives) and prints its
// header in version 2 shape and its event records.
func expand(cwd string, files []string) error {
	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		opts := []record.Option{record.WithStandardZstd(), record.WithoutPlaceholders()}
		if cwd != "" {
			sum := sha256.Sum256(data)
			opts = append(opts, record.WithFixturePlaceholders(cwd, "fixture-"+hex.EncodeToString(sum[:8])))
		}
		hdr, events, err := record.ReadAll(bytes.NewReader(data), opts...)
		if err != nil {
			_ = out.Encode(map[string]string{"file": f, "error": err.Error()})
			continue
		}
		raws := make([]json.RawMessage, len(events))
		for i, e := range events {
			raws[i] = e.Raw
		}
		_ = out.Encode(map[string]any{"file": f, "id": hdr.Header.ID, "header": hdr.Header,
			"inheritedEventCount": hdr.InheritedEventCount, "events": raws})
	}
	return nil
}

// bench appends n one-event batches through the Go SDK and reports the
// median and 99th percentile of append → acknowledged, and of append →
// searchable (the query service answers a search of the event's word with
// minGeneration = the append's generation).
func bench(ctx context.Context, nc *nats.Conn, store *bus.Store, n int) error {
	id := fmt.Sprintf("bench-go-%d", time.Now().UnixNano())
	h, err := store.Create(ctx, dshq.Header{Version: 2, ID: id, CreatedAt: time.Now().UnixMilli(), Cwd: dshq.Str("/bench")})
	if err != nil {
		return err
	}
	defer h.Close(ctx)
	qc := query.NewClient(nc)
	var acked, searchable []time.Duration
	for i := 0; i < n; i++ {
		word := fmt.Sprintf("gobench%dx", i)
		raw := fmt.Sprintf(`{"type":"user/message","seq":%d,"time":%d,"data":{"id":"m%d","role":"user","source":{"kind":"user"},"content":[{"type":"text","text":"%s"}]},"surfaceOp":"append"}`,
			i, time.Now().UnixMilli(), i, word)
		t0 := time.Now()
		gen, err := h.Append(ctx, []dshq.Event{{Raw: []byte(raw)}})
		if err != nil {
			return err
		}
		acked = append(acked, time.Since(t0))
		res, err := qc.SearchEvents(ctx, dshq.EventSearchRequest{SessionID: id, Query: word}, query.WithMinGeneration(gen), query.WithTimeoutMs(10000))
		if err != nil {
			return err
		}
		if len(res.Items) != 1 {
			return fmt.Errorf("search %s found %d events", word, len(res.Items))
		}
		searchable = append(searchable, time.Since(t0))
	}
	ms := func(d []time.Duration, q float64) float64 {
		s := append([]time.Duration(nil), d...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return float64(s[int(q*float64(len(s)-1))].Microseconds()) / 1000
	}
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"sdk": "go", "n": n,
		"ackedP50Ms": ms(acked, 0.5), "ackedP99Ms": ms(acked, 0.99),
		"searchableP50Ms": ms(searchable, 0.5), "searchableP99Ms": ms(searchable, 0.99)})
}
