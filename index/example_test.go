package index_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dshq/dshq"
	"github.com/dshq/dshq/index"
)

// The projector applies batches with the stream sequence they bring the
// index to; the query service searches.
func Example() {
	dir, _ := os.MkdirTemp("", "index-example")
	defer os.RemoveAll(dir)
	x, err := index.Open(filepath.Join(dir, "index"), index.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer x.Close()

	ctx := context.Background()
	var b index.Batch
	b.Upsert(index.Doc{SessionID: "s1", Cwd: dshq.Str("/work"), Seq: 0, Type: dshq.TypeUserMessage,
		Time: 1000, Surface: dshq.SurfaceCurrent, Text: "Is the café — the one on the corner — open?"})
	b.Upsert(index.Doc{SessionID: "s2", Seq: 3, Type: dshq.TypeAssistantMessage,
		Time: 2000, Surface: dshq.SurfaceCurrent, Text: "我们在中文环境中测试"})
	if err := x.Apply(ctx, &b, 42); err != nil {
		fmt.Println(err)
		return
	}

	for _, q := range []string{"CAFE", "中文环境", "open OR closed"} {
		page, err := x.SearchSessions(ctx, index.SessionQuery{Query: q,
			SessionFilters: []dshq.Filter{{Kind: dshq.FilterCwd, Values: []*string{dshq.Str("/work"), nil}}}})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%q at generation %d:", q, page.Generation)
		for _, h := range page.Hits {
			fmt.Printf(" %s#%d %q", h.SessionID, h.Seq, h.Snippet)
		}
		fmt.Println()
	}
	// Output:
	// "CAFE" at generation 42: s1#0 "Is the café — the one on the corner — open?"
	// "中文环境" at generation 42: s2#3 "我们在中文环境中测试"
	// "open OR closed" at generation 42:
}
