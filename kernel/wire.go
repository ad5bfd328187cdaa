package kernel

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/arborhq/arbor/jsonlimit"
)

// protocolVersion is the Jupyter messaging protocol version Arbor speaks.
const protocolVersion = "5.3"

var delimiter = []byte("<IDS|MSG>")

// header is a Jupyter message header. The parent header of a message is decoded into the same
// type; an empty parent ({}) leaves every field zero.
type header struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// message is one decoded Jupyter message. Content stays raw JSON until a handler needs it, so a
// 10 MB stream payload is decoded once, by the code that uses it.
type message struct {
	Identities [][]byte
	Header     header
	Parent     header
	Metadata   json.RawMessage
	Content    json.RawMessage
	Buffers    [][]byte
}

// signer signs and verifies messages with HMAC-SHA256 over header, parent, metadata and content.
type signer struct{ key []byte }

func (s signer) sign(parts ...[]byte) []byte {
	m := hmac.New(sha256.New, s.key)
	for _, p := range parts {
		m.Write(p)
	}
	sum := m.Sum(nil)
	out := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(out, sum)
	return out
}

// errBadSignature marks a message whose HMAC does not verify; it is dropped and logged, never used.
var errBadSignature = errors.New("bad message signature")

// decode parses the frames of one incoming message ([ids…, <IDS|MSG>, hmac, header, parent,
// metadata, content, buffers…]) and verifies its signature before looking at any JSON.
func (s signer) decode(frames [][]byte) (*message, error) {
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], delimiter) {
		i++
	}
	if i == len(frames) {
		return nil, errors.New("no <IDS|MSG> delimiter")
	}
	if len(frames)-i < 6 {
		return nil, fmt.Errorf("%d frames after the delimiter, want at least 5", len(frames)-i-1)
	}
	sig, h, p, md, c := frames[i+1], frames[i+2], frames[i+3], frames[i+4], frames[i+5]
	want := s.sign(h, p, md, c)
	if len(s.key) > 0 && !hmac.Equal(bytes.ToLower(sig), want) {
		return nil, errBadSignature
	}
	// The kernel runs the model's code, which can sign what it likes: every part is checked
	// for depth before a decoder sees it.
	for _, part := range []struct {
		name string
		data []byte
	}{{"header", h}, {"parent header", p}, {"metadata", md}, {"content", c}} {
		if err := jsonlimit.Check(part.data, jsonlimit.MaxDepth); err != nil {
			return nil, fmt.Errorf("%s: %w", part.name, err)
		}
	}
	m := &message{Identities: frames[:i], Metadata: md, Content: c, Buffers: frames[i+6:]}
	if err := json.Unmarshal(h, &m.Header); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if m.Header.MsgType == "" || m.Header.MsgID == "" {
		return nil, errors.New("header without msg_type or msg_id")
	}
	if err := json.Unmarshal(p, &m.Parent); err != nil {
		return nil, fmt.Errorf("parent header: %w", err)
	}
	return m, nil
}

// encode builds the frames of an outgoing request; parent is empty for client requests.
func (s signer) encode(h header, content any) ([][]byte, error) {
	hb, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	cb, err := json.Marshal(content)
	if err != nil {
		return nil, fmt.Errorf("encode %s content: %w", h.MsgType, err)
	}
	pb, mb := []byte("{}"), []byte("{}")
	return [][]byte{delimiter, s.sign(hb, pb, mb, cb), hb, pb, mb, cb}, nil
}

func newHeader(session, msgType string) header {
	return header{
		MsgID:    newID(),
		Session:  session,
		Username: "arbor",
		Date:     time.Now().UTC().Format(time.RFC3339Nano),
		MsgType:  msgType,
		Version:  protocolVersion,
	}
}

// newID returns a random 128-bit hex identifier.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
