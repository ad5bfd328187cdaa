package scripted

import (
	"container/list"
	"hash/maphash"
	"strings"
	"sync"

	openai "github.com/sashabaranov/go-openai"
)

// A provider's prompt cache reuses the longest prefix of a request it has already processed.
// The scripted model measures that prefix instead of guessing it: it remembers, per
// conversation, the shape of the previous request — hashes, not text, so memory stays small —
// and counts the characters this request shares with it from the start, byte for byte.
const (
	// cacheBlock is the granularity inside a message that differs: a prefix of a changed
	// message is reused in whole blocks only, as providers cache in fixed-size blocks.
	cacheBlock = 256
	// cacheConversations bounds how many conversations are remembered (least recently used go).
	cacheConversations = 256
)

// msgSig is what the cache keeps of one message: hashes of its frame (role, tool call ids and
// names, the call it answers) and of its text (content, then tool-call arguments), its length
// in the characters prompt tokens count, and the hashes of its text's prefixes at every block.
type msgSig struct {
	frame, text uint64
	chars       int
	blocks      []uint64
}

type promptCache struct {
	seed  maphash.Seed
	mu    sync.Mutex
	convs map[uint64]*list.Element // conversation key → element of lru (a *cacheEntry)
	lru   *list.List
}

type cacheEntry struct {
	key  uint64
	msgs []msgSig
}

func newPromptCache() *promptCache {
	return &promptCache{seed: maphash.MakeSeed(), convs: map[uint64]*list.Element{}, lru: list.New()}
}

// request returns how many of msgs' characters (counted like prompt tokens: message text and
// tool-call arguments) form a byte-identical prefix of the previous request of the same
// conversation, and remembers msgs as that conversation's latest request. A conversation is
// its system prompt and first user message; a request that changes either starts a new one.
func (c *promptCache) request(msgs []openai.ChatCompletionMessage, conv conversation) int {
	sigs := make([]msgSig, len(msgs))
	for i, m := range msgs {
		sigs[i] = c.sign(m)
	}
	key := maphash.String(c.seed, conv.system+"\x00"+conv.task)
	c.mu.Lock()
	defer c.mu.Unlock()
	var prev []msgSig
	if el, ok := c.convs[key]; ok {
		e := el.Value.(*cacheEntry)
		prev, e.msgs = e.msgs, sigs
		c.lru.MoveToFront(el)
	} else {
		c.convs[key] = c.lru.PushFront(&cacheEntry{key: key, msgs: sigs})
		if c.lru.Len() > cacheConversations {
			old := c.lru.Remove(c.lru.Back()).(*cacheEntry)
			delete(c.convs, old.key)
		}
	}
	return commonPrefix(prev, sigs)
}

// commonPrefix counts the characters of cur that repeat prev from the start: whole messages
// while they are identical, then whole blocks of the first message that differs.
func commonPrefix(prev, cur []msgSig) int {
	n := 0
	for i := 0; i < len(cur) && i < len(prev); i++ {
		p, m := prev[i], cur[i]
		if p.frame != m.frame {
			return n
		}
		if p.text == m.text && p.chars == m.chars {
			n += m.chars
			continue
		}
		for k := 0; k < len(m.blocks) && k < len(p.blocks) && m.blocks[k] == p.blocks[k]; k++ {
			n += cacheBlock
		}
		return n
	}
	return n
}

func (c *promptCache) sign(m openai.ChatCompletionMessage) msgSig {
	var frame strings.Builder
	frame.WriteString(m.Role + "\x00" + m.Name + "\x00" + m.ToolCallID)
	var text maphash.Hash
	text.SetSeed(c.seed)
	var s msgSig
	write := func(t string) {
		for len(t) > 0 {
			room := cacheBlock - s.chars%cacheBlock
			piece := t[:min(room, len(t))]
			text.WriteString(piece)
			s.chars += len(piece)
			t = t[len(piece):]
			if s.chars%cacheBlock == 0 {
				s.blocks = append(s.blocks, text.Sum64())
			}
		}
	}
	write(content(m))
	for _, tc := range m.ToolCalls {
		text.WriteByte(0) // where the content ends is part of what is compared, not counted
		frame.WriteString("\x00" + tc.ID + "\x00" + string(tc.Type) + "\x00" + tc.Function.Name)
		write(tc.Function.Arguments)
	}
	s.text = text.Sum64()
	s.frame = maphash.String(c.seed, frame.String())
	return s
}
