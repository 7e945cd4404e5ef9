package feed

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Benchmarks run on demand:
//
//	go test -run '^$' -bench . -benchtime 2s ./feed/

// BenchmarkPublish publishes commits of 10 event messages; it reports
// messages per second.
func BenchmarkPublish(b *testing.B) {
	pub, _ := setup(b, StreamConfig{})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g := uint64(i + 1)
		commit := make([]Message, 10)
		for j := range commit {
			commit[j] = eventMsg(b, g, fmt.Sprintf("/ws/%d", j%3), fmt.Sprintf("s-%d", j), int64(i))
		}
		if err := pub.Publish(ctx, commit); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*10)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkTailStart measures starting a subscription after a generation
// in the middle of a feed of 20,000 messages (the binary search), for the
// whole feed and for one of 10 workspaces.
func BenchmarkTailStart(b *testing.B) {
	pub, js := setup(b, StreamConfig{})
	ctx := context.Background()
	const commits = 2000
	for g := uint64(1); g <= commits; g++ {
		commit := make([]Message, 10)
		for j := range commit {
			commit[j] = eventMsg(b, g, fmt.Sprintf("/ws/%d", j), fmt.Sprintf("s-%d", j), int64(g))
		}
		if err := pub.Publish(ctx, commit); err != nil {
			b.Fatal(err)
		}
	}
	for _, f := range []struct {
		name string
		f    Filter
	}{{"whole feed", Filter{}}, {"one workspace", Filter{Workspace: wsOf("/ws/3")}}} {
		b.Run(f.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sub, err := Tail(ctx, js, f.f, AfterGeneration(uint64(1+i*7919%commits)))
				if err != nil {
					b.Fatal(err)
				}
				sub.Stop()
			}
		})
	}
}

// BenchmarkCatchUp measures delivery of retained messages to a subscriber
// (decode and check included); it reports messages per second.
func BenchmarkCatchUp(b *testing.B) {
	pub, js := setup(b, StreamConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const n = 20000
	for g := uint64(1); g <= n/10; g++ {
		commit := make([]Message, 10)
		for j := range commit {
			commit[j] = eventMsg(b, g, "/ws/a", fmt.Sprintf("s-%d", j), int64(g))
		}
		if err := pub.Publish(ctx, commit); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sub, err := Tail(ctx, js, Filter{}, Oldest())
		if err != nil {
			b.Fatal(err)
		}
		for k := 0; k < n; k++ {
			if _, err := sub.Next(ctx); err != nil {
				b.Fatal(err)
			}
		}
		sub.Stop()
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "msgs/s")
}
