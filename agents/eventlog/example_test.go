package eventlog_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/arborhq/arbor/agents/eventlog"
)

func Example() {
	dir, err := os.MkdirTemp("", "eventlog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "sessions", "s1", eventlog.LogName)

	l, err := eventlog.Open(path, eventlog.Options{})
	if err != nil {
		log.Fatal(err) // errors.Is(err, eventlog.ErrQuarantined): run `arbor fsck`
	}
	ctx := context.Background()
	if _, err := l.Append(ctx, "user_message", map[string]string{"text": "rename Foo"}); err != nil {
		log.Fatal(err)
	}
	rec, err := l.Append(ctx, "state_changed", map[string]string{"state": "running"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("acknowledged", rec.Seq, rec.Type, string(rec.Data))
	l.Close()

	recs, err := eventlog.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Println(r.Seq, r.Type, string(r.Data))
	}
	// Output:
	// acknowledged 2 state_changed {"state":"running"}
	// 1 user_message {"text":"rename Foo"}
	// 2 state_changed {"state":"running"}
}
