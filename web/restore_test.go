package web

import "testing"

// TestSessionPageOffersTheRestoreCommands: a Claude Code session's page
// shows how to restore and continue it elsewhere (dshq restore, claude
// --resume), a Codex one codex resume, a native one the restore alone.
func TestSessionPageOffersTheRestoreCommands(t *testing.T) {
	s := newStack(t)
	s.importLines(t, `{"type":"session","version":2,"id":"cc-5a1e0000-0000-4000-8000-00000000c0de","createdAt":1788000000000,"cwd":"/w/my app","isSeeded":false,"harness":"claude-code"}`)
	s.importLines(t, `{"type":"session","version":2,"id":"native-1","createdAt":1788000000000,"cwd":"/w","isSeeded":false}`)
	s.waitGeneration(t, s.importLines(t, `{"type":"session","version":2,"id":"codex-019c8bfe","createdAt":1788000001000,"cwd":"/w","isSeeded":false,"harness":"codex"}`))
	body := s.page(t, "/s/cc-5a1e0000-0000-4000-8000-00000000c0de")
	mustContain(t, "claude", body, "Continue on another machine", "dshq restore cc-5a1e0000-0000-4000-8000-00000000c0de\ncd &#39;/w/my app&#39; &amp;&amp; claude --resume 5a1e0000-0000-4000-8000-00000000c0de</pre>")
	body = s.page(t, "/s/codex-019c8bfe")
	mustContain(t, "codex", body, "dshq restore codex-019c8bfe\ncd /w &amp;&amp; codex resume 019c8bfe</pre>")
	body = s.page(t, "/s/native-1")
	mustContain(t, "native", body, "dshq restore native-1</pre>")
}
