// Package daemonflags is the one set of flags that the long-running commands
// cmd/projector and cmd/query share: how they connect to NATS, and their
// lifecycle (logging, metrics, profiles). Each flag has one name and one
// meaning in both (docs/cluster.md).
package daemonflags

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/dshq/dshq/internal/natsconn"
	"github.com/dshq/dshq/internal/pprofsrv"
)

// Flags are the shared flags' values.
type Flags struct {
	// Conn is the connection: --nats-url (env NATS_URL), --creds (env
	// NATS_CREDS), --nkey, --user, --password, --token, --tls-ca,
	// --tls-cert, --tls-key.
	Conn natsconn.Options
	// Replicas is --replicas: the replicas of every stream and bucket the
	// command creates.
	Replicas int
	// Metrics is --metrics: HOST:PORT of the Prometheus metrics ("" = off).
	Metrics string
	// Pprof is --pprof: HOST:PORT of Go's pprof profiles ("" = off).
	Pprof string
	// LogLevel is --log-level: debug, info, warn or error.
	LogLevel string
}

// Register defines the shared flags on fs; replicasUse says what --replicas
// sizes in this command.
func (f *Flags) Register(fs *flag.FlagSet, replicasUse string) {
	fs.StringVar(&f.Conn.URL, "nats-url", envOr("NATS_URL", nats.DefaultURL), "NATS server URL, comma-separated for a cluster (env NATS_URL)")
	fs.StringVar(&f.Conn.Creds, "creds", os.Getenv("NATS_CREDS"), "NATS credentials file, JWT + NKey seed (env NATS_CREDS)")
	fs.StringVar(&f.Conn.NKey, "nkey", "", "NATS NKey seed file")
	fs.StringVar(&f.Conn.User, "user", "", "NATS user")
	fs.StringVar(&f.Conn.Password, "password", "", "NATS password")
	fs.StringVar(&f.Conn.Token, "token", "", "NATS token")
	fs.StringVar(&f.Conn.TLSCA, "tls-ca", "", "CA certificate file to trust")
	fs.StringVar(&f.Conn.TLSCert, "tls-cert", "", "client certificate file (mutual TLS)")
	fs.StringVar(&f.Conn.TLSKey, "tls-key", "", "client key file (mutual TLS)")
	fs.IntVar(&f.Replicas, "replicas", 1, replicasUse)
	fs.StringVar(&f.Metrics, "metrics", "", "serve Prometheus metrics on HOST:PORT/metrics (off when empty)")
	fs.StringVar(&f.Pprof, "pprof", "", "serve Go's net/http/pprof profiles on HOST:PORT/debug/pprof/ (off when empty; keep it on loopback)")
	fs.StringVar(&f.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
}

// Check refuses values no command can run with.
func (f *Flags) Check() error {
	if f.Replicas < 1 || f.Replicas > 5 {
		return fmt.Errorf("--replicas %d: JetStream replicates 1 to 5 times", f.Replicas)
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(f.LogLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	return nil
}

// Start begins what the lifecycle flags ask for: it returns the command's
// logger (JSON lines on w at --log-level) and serves the profiles when
// --pprof is set; stop (never nil) stops serving them.
func (f *Flags) Start(w io.Writer) (log *slog.Logger, stop func(), err error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(f.LogLevel)); err != nil {
		return nil, nil, fmt.Errorf("--log-level: %w", err)
	}
	stop = func() {}
	if f.Pprof != "" {
		if stop, err = pprofsrv.Serve(f.Pprof); err != nil {
			return nil, nil, err
		}
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv})), stop, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
