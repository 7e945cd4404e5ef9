package dshq

import (
	"os"
	"strings"
	"testing"
)

func TestShardNames(t *testing.T) {
	if got := ShardSubject("0", "sessions.list"); got != "dsh.proj.0.v1.sessions.list" {
		t.Fatalf("ShardSubject = %q", got)
	}
	if got := ShardSubjectPrefix("7"); got != "dsh.proj.7.v1" {
		t.Fatalf("ShardSubjectPrefix = %q", got)
	}
	if got := ShardReplicaSubject("0", "dsh-projector-b", "sessions.list"); got != "dsh.proj.0.v1.replica.dsh-projector-b.sessions.list" {
		t.Fatalf("ShardReplicaSubject = %q", got)
	}
	if got := ShardStatusSubject("0"); got != "dsh.proj.0.v1.status" {
		t.Fatalf("ShardStatusSubject = %q", got)
	}
	if got := ShardQueueGroup("0"); got != "p0" {
		t.Fatalf("ShardQueueGroup = %q", got)
	}
}

// TestNamesAreDocumented keeps docs/protocol.md's table of names true: every
// name defined here appears in it.
func TestNamesAreDocumented(t *testing.T) {
	doc, err := os.ReadFile("docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		SessionStream, LogSubjectPrefix, LogSubjects, LeaseBucket, ProjectorDurable, CursorBucket, SpillBucket,
		FeedStream, FeedSubjectPrefix, FeedSubjects, ServiceVersion, "queue group `" + ServiceQueueGroup + "`",
		QueryService, QuerySubjectPrefix, ShardService, "dsh.proj.<shard>.v1", "`p<shard>`", "shard `" + DefaultShard + "`",
		ToolsService, ToolsSubjectPrefix, AdminService, AdminSubjectPrefix, QuerySubjectPrefix + "." + MovedEndpoint,
		"dsh.proj.<shard>.v1.replica.<replica>.<endpoint>", "dsh.proj.<shard>.v1.status",
	} {
		if !strings.Contains(string(doc), name) {
			t.Errorf("docs/protocol.md does not mention %q", name)
		}
	}
}
