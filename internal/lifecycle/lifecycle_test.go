package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReconnectDoublesItsWaitsUntilConnected(t *testing.T) {
	var waits []time.Duration
	tries := 0
	v, last, err := Reconnect(context.Background(), time.Millisecond, errors.New("closed"),
		func(_ error, wait time.Duration) { waits = append(waits, wait) },
		func() (int, error) {
			if tries++; tries < 4 {
				return 0, errors.New("refused")
			}
			return 7, nil
		}, func(error) bool { return true })
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond}
	if err != nil || v != 7 || last != 8*time.Millisecond || !slices.Equal(waits, want) {
		t.Fatalf("got %d, last wait %v, waits %v, %v; want 7 after waits %v", v, last, waits, err, want)
	}
}

func TestReconnectStopsAtAnErrorItMustNotRetry(t *testing.T) {
	tries := 0
	_, _, err := Reconnect(context.Background(), time.Millisecond, errors.New("closed"), func(error, time.Duration) {},
		func() (int, error) { tries++; return 0, errors.New("authorization violation") },
		func(err error) bool { return !strings.Contains(err.Error(), "authorization") })
	if tries != 1 || err == nil || !strings.Contains(err.Error(), "connect again after the connection closed (closed): authorization violation") {
		t.Fatalf("%d tries, %v", tries, err)
	}
}

func TestReconnectEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v, _, err := Reconnect(ctx, time.Hour, errors.New("closed"), func(error, time.Duration) {},
		func() (int, error) { t.Fatal("connected after ctx ended"); return 0, nil }, func(error) bool { return true })
	if v != 0 || err != nil {
		t.Fatalf("got %d, %v; want 0, nil", v, err)
	}
}
