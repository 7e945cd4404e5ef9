package bench

import (
	"bufio"
	"fmt"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// heapSampler records the peak of the Go heap (live and unswept objects)
// while it runs. Stop ends its goroutine.
type heapSampler struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex // guards peak
	peak uint64
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func startHeapSampler(every time.Duration) *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), peak: heapNow()}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-t.C:
				h.observe()
			}
		}
	}()
	return h
}

func (h *heapSampler) observe() {
	v := heapNow()
	h.mu.Lock()
	h.peak = max(h.peak, v)
	h.mu.Unlock()
}

// Stop ends sampling and returns the peak in bytes.
func (h *heapSampler) Stop() uint64 {
	close(h.stop)
	h.wg.Wait()
	h.observe()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.peak
}

func heapNow() uint64 { return runtimeUint64(heapMetric) }

// runtimeUint64 reads one uint64 metric of the runtime (runtime/metrics),
// 0 when it is not one.
func runtimeUint64(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// resetPeakRSS resets the kernel's RSS high-water mark of this process
// (Linux clear_refs 5). It reports whether the reset worked.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// procStatus reads a kB field (VmHWM, VmRSS) of /proc/self/status in bytes.
func procStatus(field string) (uint64, error) { return procStatusOf("self", field) }

// procStatusOf reads a kB field of /proc/<pid>/status in bytes.
func procStatusOf(pid, field string) (uint64, error) {
	f, err := os.Open("/proc/" + pid + "/status")
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", field, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != field {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("read %s: not in /proc/self/status", field)
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// cpuNow returns the CPU time (user and system) the process has used so
// far. The difference over a phase is its cost in CPU, which a busy shared
// machine distorts far less than wall time.
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuPerK is CPU milliseconds per 1,000 records.
func cpuPerK(cpu time.Duration, records uint64) float64 {
	if records == 0 {
		return 0
	}
	return float64(cpu.Microseconds()) / 1000 / (float64(records) / 1000)
}
