package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A fake kernel sends forged, malformed and genuine messages on every channel: only the
// genuine ones reach the waiting request, and each drop is logged.
func TestChannelsDropUntrustedMessages(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cf := connInfo{Transport: "ipc", IP: filepath.Join(t.TempDir(), "z"), Key: "right-key",
		ShellPort: 1, IOPubPort: 2, StdinPort: 3, ControlPort: 4, HBPort: 5}
	shell, control := zmq4.NewRouter(ctx), zmq4.NewRouter(ctx)
	iopub := zmq4.NewPub(ctx)
	for _, s := range []struct {
		s    zmq4.Socket
		port int
	}{{shell, cf.ShellPort}, {control, cf.ControlPort}, {iopub, cf.IOPubPort}} {
		if err := s.s.Listen(cf.endpoint(s.port)); err != nil {
			t.Fatal(err)
		}
		defer s.s.Close()
	}
	var logs syncBuf
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ch, err := dialChannels(ctx, ctx, cf, log)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.close()

	good, forged := signer{key: []byte(cf.Key)}, signer{key: []byte("wrong-key")}
	reply := func(sg signer, parent header, msgType string) [][]byte {
		h := newHeader("kernel", msgType)
		f, _ := sg.encode(h, map[string]string{"status": "ok"})
		pb, _ := jsonMarshal(parent)
		f[3] = pb
		f[1] = sg.sign(f[2], f[3], f[4], f[5])
		return f
	}
	for _, tc := range []struct {
		name string
		sock zmq4.Socket // the fake kernel's side
		dial chanName    // ours
	}{{"shell", shell, shellChan}, {"control", control, controlChan}} {
		t.Run(tc.name, func(t *testing.T) {
			h, box, err := ch.request(tc.dial, "kernel_info_request", struct{}{})
			if err != nil {
				t.Fatal(err)
			}
			defer ch.unregister(h.MsgID)
			req, err := tc.sock.Recv()
			if err != nil {
				t.Fatal(err)
			}
			id := req.Frames[0]
			for _, f := range [][][]byte{
				reply(forged, h, "forged_reply"),
				{[]byte("<IDS|MSG>"), []byte("junk")},
				append(reply(good, h, "kernel_info_reply")[:2], []byte("{not json"), []byte("{}"), []byte("{}"), []byte("{}")),
				reply(good, h, "kernel_info_reply"),
			} {
				if err := tc.sock.SendMulti(zmq4.NewMsgFrom(append([][]byte{id}, f...)...)); err != nil {
					t.Fatal(err)
				}
			}
			<-box.notify
			time.Sleep(50 * time.Millisecond) // let any wrongly accepted message arrive too
			msgs := box.take()
			if len(msgs) != 1 || msgs[0].Header.MsgType != "kernel_info_reply" {
				t.Fatalf("delivered %d messages: %+v", len(msgs), msgs)
			}
		})
	}
	t.Run("iopub", func(t *testing.T) {
		h := newHeader(ch.session, "execute_request")
		box := ch.register(h.MsgID)
		defer ch.unregister(h.MsgID)
		topic := []byte("kernel.x.status")
		// PUB drops messages until our subscription has arrived: publish until one gets through.
		for delivered := false; !delivered; {
			iopub.SendMulti(zmq4.NewMsgFrom(append([][]byte{topic}, reply(good, h, "status")...)...))
			select {
			case <-box.notify:
				delivered = true
			case <-time.After(20 * time.Millisecond):
			}
		}
		box.take()
		iopub.SendMulti(zmq4.NewMsgFrom(append([][]byte{topic}, reply(forged, h, "stream")...)...))
		iopub.SendMulti(zmq4.NewMsgFrom(append([][]byte{topic}, reply(good, h, "status")...)...))
		<-box.notify
		time.Sleep(50 * time.Millisecond)
		if msgs := box.take(); len(msgs) != 1 || msgs[0].Header.MsgType != "status" {
			t.Fatalf("delivered %+v", msgs)
		}
	})
	if n := strings.Count(logs.String(), "dropped incoming message"); n < 5 {
		t.Errorf("%d drops logged, want 5:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "bad message signature") {
		t.Errorf("signature failures not logged:\n%s", logs.String())
	}
}
