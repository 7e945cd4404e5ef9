package microhost

import (
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/dshq/dshq"
)

// EndpointData is the endpoint-specific part of an endpoint's STATS entry
// (`nats micro info` shows it under "Endpoint Specific Statistics",
// `nats micro stats --json` as "data"): the standard fields' counts again,
// with the errors split by code.
type EndpointData struct {
	// Answered is the number of requests answered, failures included.
	Answered int `json:"num_answered"`
	// Errors is the number of requests answered with an error; ErrorsByCode
	// splits it by the taxonomy's codes.
	Errors       int            `json:"num_errors"`
	ErrorsByCode map[string]int `json:"errors_by_code,omitempty"`
	// LastError is "<CODE>: <message>" of the latest failure.
	LastError string `json:"last_error,omitempty"`
	// ProcessingTime is the total time from arrival to answer;
	// AverageProcessingTime is its mean.
	ProcessingTime        time.Duration `json:"processing_time"`
	AverageProcessingTime time.Duration `json:"average_processing_time"`
}

// stats counts one endpoint's answers.
type stats struct {
	mu sync.Mutex // guards the fields below
	// requests, errors, lastError and total are the standard fields (a
	// reply that could not be sent is an error too, as micro counts it).
	requests, errors int
	lastError        string
	total            time.Duration
	data             EndpointData
}

// record counts one answer that took took; failure is nil for a success.
func (s *stats) record(took time.Duration, failure *dshq.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.total += took
	s.data.Answered++
	s.data.ProcessingTime = s.total
	s.data.AverageProcessingTime = s.total / time.Duration(s.data.Answered)
	if failure == nil {
		return
	}
	s.errors++
	s.lastError = string(failure.Code) + ":" + failure.Message // micro's "code:description"
	s.data.Errors++
	if s.data.ErrorsByCode == nil {
		s.data.ErrorsByCode = map[string]int{}
	}
	s.data.ErrorsByCode[string(failure.Code)]++
	s.data.LastError = string(failure.Code) + ": " + failure.Message
}

// respondFailed counts an answer that was recorded but could not be sent.
func (s *stats) respondFailed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errors++
	s.lastError = fmt.Sprintf("%v: %v", micro.ErrRespond, err) // as micro says it
}

// snapshot returns the standard entry of ep with its data.
func (s *stats) snapshot(ep *endpoint) *micro.EndpointStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.data
	d.ErrorsByCode = maps.Clone(s.data.ErrorsByCode)
	data, _ := json.Marshal(d)
	st := &micro.EndpointStats{Name: ep.micro, Subject: ep.Subject, QueueGroup: ep.queue,
		NumRequests: s.requests, NumErrors: s.errors, LastError: s.lastError, ProcessingTime: s.total, Data: data}
	if s.requests > 0 {
		st.AverageProcessingTime = s.total / time.Duration(s.requests)
	}
	return st
}

// Stats returns what $SRV.STATS answers for this instance.
func (s *Service) Stats() micro.Stats {
	st := micro.Stats{ServiceIdentity: s.identity(), Type: micro.StatsResponseType, Started: s.started,
		Endpoints: make([]*micro.EndpointStats, 0, len(s.eps))}
	for _, ep := range s.eps {
		st.Endpoints = append(st.Endpoints, ep.stats.snapshot(ep))
	}
	return st
}

// Info returns what $SRV.INFO answers for this instance.
func (s *Service) Info() micro.Info {
	info := micro.Info{ServiceIdentity: s.identity(), Type: micro.InfoResponseType, Description: s.cfg.Description,
		Endpoints: make([]micro.EndpointInfo, 0, len(s.eps))}
	for _, ep := range s.eps {
		info.Endpoints = append(info.Endpoints, micro.EndpointInfo{Name: ep.micro, Subject: ep.Subject, QueueGroup: ep.queue})
	}
	return info
}

func (s *Service) identity() micro.ServiceIdentity {
	return micro.ServiceIdentity{Name: s.cfg.Name, ID: s.id, Version: dshq.ServiceVersion, Metadata: maps.Clone(s.cfg.Metadata)}
}

// serveMonitoring answers PING, INFO and STATS on their three subjects each:
// every service, every instance of this service, this instance.
func (s *Service) serveMonitoring() error {
	ping := micro.Ping{ServiceIdentity: s.identity(), Type: micro.PingResponseType}
	for verb, answer := range map[micro.Verb]func() any{
		micro.PingVerb:  func() any { return ping },
		micro.InfoVerb:  func() any { return s.Info() },
		micro.StatsVerb: func() any { return s.Stats() },
	} {
		for _, scope := range [][2]string{{"", ""}, {s.cfg.Name, ""}, {s.cfg.Name, s.id}} {
			subject, err := micro.ControlSubject(verb, scope[0], scope[1])
			if err != nil {
				return err
			}
			sub, err := s.nc.Subscribe(subject, func(m *nats.Msg) {
				body, _ := json.Marshal(answer())
				if err := m.Respond(body); err != nil {
					s.cfg.Logger.Warn("respond", "service", s.cfg.Name, "subject", m.Subject, "err", err)
				}
			})
			if err != nil {
				return fmt.Errorf("subscribe %s: %w", subject, err)
			}
			s.verbs = append(s.verbs, sub)
		}
	}
	return nil
}
