package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Turn is one message of a chat prompt, in OpenAI's terms. An assistant
// turn may carry tool calls; a tool turn the id and name of the call it
// answers (tools.go).
type Turn struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// shareGPTRoles maps ShareGPT speakers ("from") to OpenAI roles.
var shareGPTRoles = map[string]string{"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
	"system": "system", "tool": "tool", "function": "tool", "observation": "tool", "function_response": "tool",
	"function_call": "assistant"}

// chatRoles are the roles of OpenAI messages that servers take (SGLang's
// chat endpoint answers 400 to another).
var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// ParseTurns reads the turns of a "messages" or "conversations" list: OpenAI
// {"role", "content"} (content a string or a list of text parts) or ShareGPT
// {"from", "value"} (human, gpt, system), mapped to OpenAI roles, with
// their tool calls and results (tools.go; ParseChat pairs them). It is the
// one reading of chat prompts, for gen and export alike; an error names the
// turn (from 1): an unknown speaker or role among them, which no server
// takes, is refused here, before anything is sent.
func ParseTurns(raw []json.RawMessage) ([]Turn, error) {
	out := make([]Turn, 0, len(raw))
	for i, r := range raw {
		var t struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			From    string          `json:"from"`
			Value   string          `json:"value"`
			toolFields
		}
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, fmt.Errorf("turn %d: %v", i+1, err)
		}
		if t.From != "" {
			turn, err := shareGPTTurn(t.From, t.Value)
			if err != nil {
				return nil, fmt.Errorf("turn %d: %w", i+1, err)
			}
			out = append(out, turn)
			continue
		}
		if t.Role == "" {
			return nil, fmt.Errorf("turn %d has no role", i+1)
		}
		if !chatRoles[t.Role] {
			return nil, fmt.Errorf("turn %d: unknown role %q (want system, developer, user, assistant, tool or function)", i+1, t.Role)
		}
		c, err := contentText(t.Content)
		if err != nil {
			return nil, fmt.Errorf("turn %d: %w", i+1, err)
		}
		turn := Turn{Role: t.Role, Content: c}
		if err := t.toolFields.read(&turn); err != nil {
			return nil, fmt.Errorf("turn %d: %w", i+1, err)
		}
		out = append(out, turn)
	}
	return out, nil
}

// shareGPTTurn reads a ShareGPT turn: its speaker mapped to a role, a
// function_call's calls, a gpt turn's Hermes <tool_call> blocks, a Hermes
// result's tool name.
func shareGPTTurn(from, value string) (Turn, error) {
	role, ok := shareGPTRoles[from]
	if !ok {
		return Turn{}, fmt.Errorf("unknown speaker %q (want human, gpt, system, function_call or observation)", from)
	}
	t := Turn{Role: role, Content: value}
	var err error
	switch {
	case from == "function_call":
		t.Content = ""
		t.ToolCalls, err = shareGPTCalls(value)
	case role == "assistant":
		t.Content, t.ToolCalls, err = hermesCalls(value)
	case role == "tool":
		t.Name = hermesResult(value)
	}
	return t, err
}

// contentText reads a message content: a string, or OpenAI's list of
// {"type":"text","text":...} parts (text parts only), joined.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content is neither a string nor a list of parts")
	}
	out := ""
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %q is not supported (text only)", p.Type)
		}
		out += p.Text
	}
	return out, nil
}

// OpenOutput opens a file that only its writer appends to (gen's answers,
// export's records), creating it, and locks it so that a second writer (a
// gen or an export of the same folder) fails at once instead of
// interleaving lines. The lock goes with the file's close or the process.
func OpenOutput(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// A lock held for a moment is waited for: a process that forks (a test
	// binary, a program embedding gendex) lends its open files to the child
	// until the child execs, lock included, even after it closed them. A
	// writer that holds the file is still there a second later.
	deadline := time.Now().Add(outputLockWait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%s is being written by another gendex gen or export (lock: %v); run this when it is done", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// outputLockWait is how long OpenOutput waits for a lock held by another.
const outputLockWait = time.Second
