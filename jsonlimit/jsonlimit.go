// Package jsonlimit bounds how deeply the JSON that arrives from outside may nest, before any
// decoder sees it. Decoders recurse once per level: go.lsp.dev/jsonrpc2 decodes with
// segmentio/encoding, which has no depth limit at all, so one frame of three million `[`
// grows a goroutine's stack past Go's 1 GB ceiling and the runtime kills the process
// (`fatal error: stack overflow` cannot be recovered). encoding/json stops at 10,000 levels;
// nothing Arbor exchanges comes near either.
//
// Call [Check] on a whole message, or feed a [Scanner] the message's bytes as they are read,
// so a frame that is too deep is refused after at most [MaxDepth] bytes of it:
//
//	if err := jsonlimit.Check(line, jsonlimit.MaxDepth); err != nil {
//		return fmt.Errorf("request: %w", err) // "JSON nesting depth 1001 at byte 1000 exceeds the limit of 1000"
//	}
//
// The scan only counts brackets outside strings; it does not validate. Text that is not JSON
// passes when it is not too deep, and the decoder then says what is wrong with it.
package jsonlimit

import "fmt"

// MaxDepth is the nesting the daemon accepts from any peer: a kernel's Python, an editor, an
// ACP client, a journal line. It is Python's default recursion limit, which bounds what a
// kernel's json.dumps can write, so only a crafted message goes deeper.
const MaxDepth = 1000

// DepthError reports a message nested more deeply than the limit.
type DepthError struct {
	Depth  int   // the depth reached (Limit+1: the scan stops there)
	Limit  int   // the limit it exceeds
	Offset int64 // the byte, counted from 0, that opened the level past the limit
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("JSON nesting depth %d at byte %d exceeds the limit of %d", e.Depth, e.Offset, e.Limit)
}

// Check reports a *DepthError when data nests more than limit levels of arrays and objects.
func Check(data []byte, limit int) error {
	s := NewScanner(limit)
	_, err := s.Write(data)
	return err
}

// Scanner counts nesting across the pieces of one message as they arrive. The zero value has
// a limit of 0; use [NewScanner].
type Scanner struct {
	limit    int
	depth    int
	off      int64
	inString bool
	escaped  bool
	err      error
}

// NewScanner returns a Scanner for one message with the given limit.
func NewScanner(limit int) *Scanner { return &Scanner{limit: limit} }

// Write scans the next piece of the message. Once the limit is exceeded it returns the
// *DepthError, then and on every later call; it never keeps p. It implements io.Writer, so a
// reader can be teed into it.
func (s *Scanner) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	depth, inString, escaped := s.depth, s.inString, s.escaped
	for i, c := range p {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > s.limit {
				s.err = &DepthError{Depth: depth, Limit: s.limit, Offset: s.off + int64(i)}
				s.off += int64(i + 1)
				return i + 1, s.err
			}
		case c == ']' || c == '}':
			if depth > 0 {
				depth--
			}
		}
	}
	s.depth, s.inString, s.escaped = depth, inString, escaped
	s.off += int64(len(p))
	return len(p), nil
}

// Reset readies the Scanner for the next message.
func (s *Scanner) Reset() { *s = Scanner{limit: s.limit} }
