package index

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dshq/dshq"
)

var phraseBenchDocs = flag.Int("phrase-bench-docs", 200_000, "docs in BenchmarkCommonPhrase's corpus (16 per session)")

// commonPhraseCorpus is shaped like cmd/dshq-bench's corpus: sentences of
// 6 to 25 words from a 100-word vocabulary (or a Chinese one), a third of
// them ending with one of four common phrases, 16 docs per session in 20
// working directories, a tenth of the docs log-only.
func commonPhraseCorpus(n int) []Doc {
	r := rand.New(rand.NewPCG(7, 8))
	en := strings.Fields(`the retry budget config parser index cursor lineage surface
compaction summary tool result grep search session projector stream generation snapshot
window trace filter replacement provenance header workspace lease deploy build test module
function handler request response timeout error latency cache memory disk network server
client schema migration database query table column row commit branch merge review patch
release version upgrade dependency vendor lint format vet race goroutine channel mutex
context deadline signal shutdown restart health metric histogram counter gauge log level`)
	zh := strings.Fields(`配置 重试 预算 索引 会话 搜索 压缩 摘要 工具 结果 错误 超时 数据库
迁移 版本 发布 测试 构建 部署 缓存 内存 网络 服务器 客户端 日志 指标 分支 合并 审查 补丁`)
	common := []string{"retry budget", "config parser", "重试 预算", "timeout"}
	docs := make([]Doc, n)
	for i := range docs {
		words := en
		if r.IntN(4) == 0 {
			words = zh
		}
		w := make([]string, 6+r.IntN(20))
		for j := range w {
			w[j] = words[r.IntN(len(words))]
		}
		text := strings.Join(w, " ")
		if r.IntN(3) == 0 {
			text += " " + common[r.IntN(len(common))]
		}
		if i%10_000 == 0 {
			text += " quasar pulsar" // a rare phrase: one doc in 10,000
		}
		surface := dshq.SurfaceCurrent
		if r.IntN(10) == 0 {
			surface = dshq.SurfaceLogOnly
		}
		s := i / 16
		docs[i] = Doc{SessionID: fmt.Sprintf("bench-%05d", s), Cwd: dshq.Str(fmt.Sprintf("/w/%d", s%20)), CreatedAt: int64(s),
			Seq: int64(i % 16), Type: dshq.TypeUserMessage, Time: int64(1_790_000_000_000 + i*1000), Surface: surface, Text: text}
	}
	return docs
}

// BenchmarkCommonPhrase ranks the query service's first-page windows
// (MaxLimit keys) of common phrases at scale: a two-word phrase, one word,
// and a phrase with cwd and surface filters across sessions, and a phrase in
// one session. cpu-ms/op is the process's CPU per search:
//
//	go test -run '^$' -bench CommonPhrase -benchtime 20x ./index/
func BenchmarkCommonPhrase(b *testing.B) {
	docs := commonPhraseCorpus(*phraseBenchDocs)
	start := time.Now()
	x := openLoaded(b, docs, 5000)
	b.Logf("%d docs indexed in %v", len(docs), time.Since(start))
	ctx := context.Background()
	cwd, current := "/w/3", string(dshq.SurfaceCurrent)
	filtered := func(q string) SessionQuery {
		return SessionQuery{Query: q, Limit: MaxLimit,
			SessionFilters: []dshq.Filter{{Kind: dshq.FilterCwd, Values: []*string{&cwd}}},
			EventFilters:   []dshq.Filter{{Kind: dshq.FilterSurface, Values: []*string{&current}}}}
	}
	cases := []struct {
		name string
		rank func() (Ranking, error)
	}{
		{"RankSessionsPhrase", func() (Ranking, error) {
			return x.RankSessions(ctx, SessionQuery{Query: "retry budget", Limit: MaxLimit})
		}},
		{"RankSessionsChinesePhrase", func() (Ranking, error) {
			return x.RankSessions(ctx, SessionQuery{Query: "重试 预算", Limit: MaxLimit})
		}},
		{"RankSessionsWord", func() (Ranking, error) {
			return x.RankSessions(ctx, SessionQuery{Query: "timeout", Limit: MaxLimit})
		}},
		{"RankSessionsPhraseFiltered", func() (Ranking, error) { return x.RankSessions(ctx, filtered("retry budget")) }},
		{"RankSessionsRarePhrase", func() (Ranking, error) {
			return x.RankSessions(ctx, SessionQuery{Query: "quasar pulsar", Limit: dshq.DefaultSearchLimit + 1})
		}},
		{"RankEventsPhrase", func() (Ranking, error) {
			return x.RankEvents(ctx, EventQuery{SessionID: "bench-00042", Query: "retry budget", Limit: dshq.DefaultSearchLimit + 1})
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var ds []time.Duration
			keys := 0
			cpu := cpuTime()
			for b.Loop() {
				t0 := time.Now()
				r, err := c.rank()
				if err != nil {
					b.Fatal(err)
				}
				ds = append(ds, time.Since(t0))
				keys = len(r.Keys)
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(len(ds)), "cpu-ms/op")
			b.ReportMetric(float64(keys), "keys")
			reportPercentiles(b, ds)
		})
	}
}
