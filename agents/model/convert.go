package model

import (
	"encoding/json"
	"fmt"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// toolDescription tells the model what the python tool is.
const toolDescription = "Run Python code in your persistent IPython kernel. State persists between calls; " +
	"top-level await works. The cell's stdout, stderr, result and any traceback are returned."

// pythonTool is the one tool offered in "tools" mode.
var pythonTool = openai.Tool{
	Type: openai.ToolTypeFunction,
	Function: &openai.FunctionDefinition{
		Name:        ToolName,
		Description: toolDescription,
		Parameters: json.RawMessage(`{"type":"object","properties":{"code":{"type":"string",` +
			`"description":"Python source to execute in the kernel"}},"required":["code"]}`),
	},
}

// FencedInstructions is appended to the system prompt in "fenced" mode, where
// the model has no tools and calls python by writing fenced blocks.
const FencedInstructions = "You have no function-calling tools. To run Python in your persistent IPython kernel, " +
	"write the code in a fenced block that starts with ```python and ends with ```. Every such block in your reply " +
	"is executed in order, and the output comes back in the next user message. A reply without a ```python block " +
	"ends your turn."

// chatRequest builds the go-openai request for one attempt.
func (c *Client) chatRequest(req Request) (openai.ChatCompletionRequest, error) {
	fenced := c.cfg.ToolMode == ToolModeFenced
	msgs := make([]openai.ChatCompletionMessage, 0, len(req.Messages)+1)
	system := req.System
	if fenced {
		system = strings.TrimSpace(system + "\n\n" + FencedInstructions)
	}
	if system != "" {
		msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: system})
	}
	for i, m := range req.Messages {
		var (
			om  openai.ChatCompletionMessage
			err error
		)
		if fenced {
			om, err = fencedMessage(m)
		} else {
			om, err = toolsMessage(m)
		}
		if err != nil {
			return openai.ChatCompletionRequest{}, fmt.Errorf("message %d: %w", i, err)
		}
		// Fenced tool results become user messages; merge neighbours so the
		// roles alternate, which many chat templates require.
		if n := len(msgs); fenced && n > 0 && om.Role == openai.ChatMessageRoleUser && msgs[n-1].Role == om.Role {
			msgs[n-1].Content += "\n\n" + om.Content
			continue
		}
		msgs = append(msgs, om)
	}
	r := openai.ChatCompletionRequest{Model: c.cfg.Model, Messages: msgs, Stream: true}
	if !c.noStreamOptions.Load() {
		r.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	if !fenced {
		r.Tools = []openai.Tool{pythonTool}
	}
	return r, nil
}

func toolsMessage(m Message) (openai.ChatCompletionMessage, error) {
	om := openai.ChatCompletionMessage{Role: m.Role, Content: m.Content}
	switch m.Role {
	case RoleSystem, RoleUser:
	case RoleAssistant:
		for _, tc := range m.ToolCalls {
			args, err := json.Marshal(map[string]string{"code": tc.Code})
			if err != nil {
				return om, err
			}
			om.ToolCalls = append(om.ToolCalls, openai.ToolCall{
				ID: tc.ID, Type: openai.ToolTypeFunction,
				Function: openai.FunctionCall{Name: ToolName, Arguments: string(args)},
			})
		}
	case RoleTool:
		if m.ToolCallID == "" {
			return om, fmt.Errorf("tool message without a tool call id")
		}
		om.ToolCallID = m.ToolCallID
		if om.Content == "" {
			// Some servers reject a tool message without content.
			om.Content = "(no output)"
		}
	default:
		return om, fmt.Errorf("unknown role %q; expected system, user, assistant or tool", m.Role)
	}
	return om, nil
}

func fencedMessage(m Message) (openai.ChatCompletionMessage, error) {
	switch m.Role {
	case RoleSystem, RoleUser:
		return openai.ChatCompletionMessage{Role: m.Role, Content: m.Content}, nil
	case RoleAssistant:
		return openai.ChatCompletionMessage{Role: m.Role, Content: renderFenced(m.Content, m.ToolCalls)}, nil
	case RoleTool:
		out := m.Content
		if out == "" {
			out = "(no output)"
		}
		return openai.ChatCompletionMessage{Role: RoleUser, Content: "Output of the python block:\n```\n" + out + "\n```"}, nil
	default:
		return openai.ChatCompletionMessage{}, fmt.Errorf("unknown role %q; expected system, user, assistant or tool", m.Role)
	}
}

// EstimateTokens estimates the tokens req takes in the model's context, at 4
// characters per token plus a little per message, the same rule used when a
// server reports no usage. Compare it with Config().ContextWindow to decide
// when to compact before the server refuses with [ErrContextOverflow].
func (c *Client) EstimateTokens(req Request) int64 {
	oreq, err := c.chatRequest(req)
	if err != nil {
		return 0
	}
	const perMessage = 4 // role and framing tokens of chat templates
	chars := estimateRequestChars(oreq)
	if len(oreq.Tools) > 0 {
		chars += len(toolDescription) + 120 // the schema around it
	}
	return int64(estimateTokens(chars) + perMessage*len(oreq.Messages))
}

// estimateRequestChars counts what the 4-chars-per-token estimate sees.
func estimateRequestChars(r openai.ChatCompletionRequest) int {
	n := 0
	for _, m := range r.Messages {
		n += len(m.Content)
		for _, tc := range m.ToolCalls {
			n += len(tc.Function.Arguments)
		}
	}
	return n
}
