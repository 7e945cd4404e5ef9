package query

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/dshq/dshq"
)

// EndpointData is the endpoint-specific part of a service instance's micro
// STATS reply (`nats micro info` shows it under "Endpoint Specific
// Statistics", `nats micro stats --json` as "data"). The services answer
// each request from a worker goroutine, after micro's handler has returned,
// so micro's own num_errors stays 0 and its processing_time is only the
// hand-off; these counters are the answered requests as the workers saw
// them.
type EndpointData struct {
	// Answered is the number of requests answered, failures included.
	Answered int `json:"num_answered"`
	// Errors is the number of requests answered with an error; ErrorsByCode
	// splits it by the taxonomy's codes.
	Errors       int            `json:"num_errors"`
	ErrorsByCode map[string]int `json:"errors_by_code,omitempty"`
	// LastError is "<CODE>: <message>" of the latest failure.
	LastError string `json:"last_error,omitempty"`
	// ProcessingTime is the total time from dispatch to answer;
	// AverageProcessingTime is its mean.
	ProcessingTime        time.Duration `json:"processing_time"`
	AverageProcessingTime time.Duration `json:"average_processing_time"`
}

// serviceStats holds the EndpointData of one service instance.
type serviceStats struct {
	mu         sync.Mutex // guards byEndpoint
	byEndpoint map[string]*EndpointData
}

func newServiceStats() *serviceStats {
	return &serviceStats{byEndpoint: map[string]*EndpointData{}}
}

// record counts one answered request of the micro endpoint name.
func (s *serviceStats) record(name string, took time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.byEndpoint[name]
	if d == nil {
		d = &EndpointData{}
		s.byEndpoint[name] = d
	}
	d.Answered++
	d.ProcessingTime += took
	d.AverageProcessingTime = d.ProcessingTime / time.Duration(d.Answered)
	if err == nil {
		return
	}
	code := dshq.ErrorCode(err)
	if code == "" {
		code = dshq.CodePersistenceFailed
	}
	d.Errors++
	if d.ErrorsByCode == nil {
		d.ErrorsByCode = map[string]int{}
	}
	d.ErrorsByCode[string(code)]++
	d.LastError = string(code) + ": " + err.Error()
}

// data is the micro StatsHandler: a copy of the endpoint's counters.
func (s *serviceStats) data(e *micro.Endpoint) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := EndpointData{}
	if cur := s.byEndpoint[e.Name]; cur != nil {
		d = *cur
		if cur.ErrorsByCode != nil {
			d.ErrorsByCode = make(map[string]int, len(cur.ErrorsByCode))
			for k, v := range cur.ErrorsByCode {
				d.ErrorsByCode[k] = v
			}
		}
	}
	return d
}
