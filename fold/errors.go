package fold

import "fmt"

// Rules name the check a ValidationError failed. They are stable strings a
// caller may log or count; the Message is for people.
const (
	RuleEnvelope      = "envelope"            // key set, type, time, data, ignorable
	RuleSeq           = "seq"                 // seq = next index
	RuleLossless      = "lossless-json"       // Strict: no -0, no non-finite numbers
	RuleMessageShape  = "message-shape"       // Strict: user/assistant/tool-result messages
	RuleRequestHeader = "request-header"      // Strict: provider/model/reason, refused types
	RuleSurfaceOp     = "surface-op"          // surfaceOp presence and shape
	RuleSources       = "source-event-seqs"   // sourceEventSeqs presence and shape
	RuleReplaceRange  = "replace-range"       // start/end must be current nodes, in order
	RuleReplaceSource = "replace-sources"     // a replace must cite every shadowed node
	RuleToolRewrite   = "tool-result-rewrite" // a tool/result replace rewrites one result's content
	RuleTitle         = "title"               // Strict: session/title payload
	RuleData          = "data"                // data that cannot be decoded where it must be
)

// ValidationError is why an event was refused. Apply returns it (and nothing
// else) for a bad event; the state is then unchanged.
type ValidationError struct {
	// Seq is the seq of the refused event as it was written.
	Seq int64 `json:"seq"`
	// Rule is one of the Rule… constants.
	Rule string `json:"rule"`
	// Message names the problem in upstream's words, e.g. "session event seq
	// 3 is not contiguous; expected 2".
	Message string `json:"message"`
}

// Error returns the message.
func (e *ValidationError) Error() string { return e.Message }

func invalid(seq int64, rule, format string, args ...any) *ValidationError {
	return &ValidationError{Seq: seq, Rule: rule, Message: fmt.Sprintf(format, args...)}
}
