package record_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/dshq/dshq/record"
)

func ExampleReadAll() {
	log := `{"type":"session","version":0,"id":"{{sessionId}}","createdAt":1,"cwd":"{{cwd}}/workspace"}
{"type":"text-chunks","seq0":0,"time0":100,"data":{"turn":1,"step":1,"index":0,"dt":[2,-1],"texts":["He","ll","o"]}}
`
	h, evs, err := record.ReadAll(strings.NewReader(log), record.WithName("example.jsonl"),
		record.WithFixturePlaceholders("/tmp/ws", "fresh-id"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(h.Header.ID, *h.Header.Cwd, h.FormatVersion)
	for _, e := range evs {
		fmt.Println(e.Seq, e.Time, e.Type)
	}
	// Output:
	// fresh-id /tmp/ws 0
	// 0 100 assistant/chunk
	// 1 102 assistant/chunk
	// 2 101 assistant/chunk
}

func ExampleReadAll_seqGap() {
	log := `{"type":"session","version":0,"id":"s","createdAt":1}
{"type":"a","seq":0,"time":0,"data":{}}
{"type":"a","seq":5,"time":0,"data":{}}
`
	_, _, err := record.ReadAll(strings.NewReader(log), record.WithName("gap.jsonl"))
	fmt.Println(err)
	// Output:
	// gap.jsonl: line 3: seq-gap: seq gap (expected 1, got 5)
}

func ExampleSubjectToken() {
	for _, id := range []string{"session-1", "a.b/c"} {
		tok, _ := record.SubjectToken(id)
		back, _ := record.ParseSubjectToken(tok)
		fmt.Println(tok, back == id)
	}
	// Output:
	// session-1 true
	// ~YS5iL2M true
}

func ExampleWriter() {
	log := "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1}\n" +
		`{"type":"assistant/chunk","seq":0,"time":5,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}}` + "\n" +
		`{"type":"assistant/chunk","seq":1,"time":6,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"b"}}}` + "\n" +
		`{"type":"assistant/chunk","seq":2,"time":6,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"c"}}}` + "\n"
	h, evs, _ := record.ReadAll(strings.NewReader(log))
	w := record.NewWriter(os.Stdout)
	_ = w.WriteHeader(h)
	for _, e := range evs {
		_ = w.WriteEvent(e)
	}
	_ = w.Close()
	// Output:
	// {"type":"session","version":0,"id":"s","createdAt":1}
	// {"type":"text-chunks","seq0":0,"time0":5,"data":{"turn":1,"step":1,"index":0,"dt":[1,0],"texts":["a","b","c"]}}
}
