package record

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/internal/corpus"
)

// benchCorpus returns the valid corpus files, realized.
func benchCorpus(b *testing.B) [][]byte {
	paths, _ := filepath.Glob(filepath.Join(corpus.Require(b), "*.jsonl"))
	var files [][]byte
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		raw = bytes.ReplaceAll(raw, []byte("{{cwd}}"), []byte("/ws"))
		raw = bytes.ReplaceAll(raw, []byte("{{sessionId}}"), []byte("bench"))
		if _, _, err := ReadAll(bytes.NewReader(raw)); err == nil {
			files = append(files, raw)
		}
	}
	if len(files) == 0 {
		b.Skip("no corpus")
	}
	return files
}

func BenchmarkParseEvent(b *testing.B) {
	var lines [][]byte
	size := 0
	for _, f := range benchCorpus(b) {
		for _, l := range bytes.Split(f, []byte("\n"))[1:] {
			if len(l) > 0 && !strings.Contains(string(l[:40]), "-chunks") {
				lines = append(lines, l)
				size += len(l)
			}
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			if _, err := ParseEvent(l); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/event")
}

func BenchmarkReadCorpus(b *testing.B) {
	files := benchCorpus(b)
	size, events := 0, 0
	for _, f := range files {
		size += len(f)
		_, evs, _ := ReadAll(bytes.NewReader(f))
		events += len(evs)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for _, f := range files {
			if _, _, err := ReadAll(bytes.NewReader(f)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
}

func BenchmarkWriteCorpus(b *testing.B) {
	type log struct {
		h   dshq.HeaderRecord
		evs []dshq.Event
	}
	var logs []log
	size := 0
	for _, f := range benchCorpus(b) {
		h, evs, _ := ReadAll(bytes.NewReader(f))
		logs = append(logs, log{h, evs})
		size += len(f)
	}
	for _, c := range []struct {
		name string
		opts []WriterOption
	}{{"packed", nil}, {"unpacked", []WriterOption{WithPacking(false)}}, {"zstd", []WriterOption{WithZstd()}}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				for _, l := range logs {
					w := NewWriter(io.Discard, c.opts...)
					_ = w.WriteHeader(l.h)
					for _, e := range l.evs {
						_ = w.WriteEvent(e)
					}
					if err := w.Close(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
