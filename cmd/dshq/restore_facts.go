package main

import (
	"bytes"
	"encoding/json"
	"os"
	"time"
)

// facts are what a source file's lines state that restore needs: Claude
// Code's sessionId, agentId and version; a Codex rollout's thread id and
// start (session_meta, else the first timestamp).
type facts struct {
	sessionID, agentID, version string
	threadID                    string
	start                       time.Time
}

// sourceFacts reads facts from the first lines that state them.
func sourceFacts(data []byte) facts {
	var f facts
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		var rec struct {
			SessionID string `json:"sessionId"`
			AgentID   string `json:"agentId"`
			Version   string `json:"version"`
			Type      string `json:"type"`
			Timestamp string `json:"timestamp"`
			Payload   struct {
				ID        string `json:"id"`
				Timestamp string `json:"timestamp"`
			} `json:"payload"`
		}
		if json.Unmarshal(line, &rec) != nil {
			continue
		}
		set := func(dst *string, v string) {
			if *dst == "" {
				*dst = v
			}
		}
		set(&f.sessionID, rec.SessionID)
		set(&f.agentID, rec.AgentID)
		set(&f.version, rec.Version)
		if rec.Type == "session_meta" && f.threadID == "" {
			f.threadID = rec.Payload.ID
			if t, err := time.Parse(time.RFC3339Nano, rec.Payload.Timestamp); err == nil {
				f.start = t
			}
		}
		if f.start.IsZero() {
			if t, err := time.Parse(time.RFC3339Nano, rec.Timestamp); err == nil {
				f.start = t
			}
		}
		if f.sessionID != "" && f.agentID != "" && f.version != "" || f.threadID != "" && !f.start.IsZero() {
			break
		}
	}
	return f
}

// machine names this machine to the others: $DSH_MACHINE, else the host
// name (a write lease names its holder with it).
func (g *globals) machine() string {
	if m := g.getenv("DSH_MACHINE"); m != "" {
		return m
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "unknown machine"
}
