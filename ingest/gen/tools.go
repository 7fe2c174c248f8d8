package gen

// Tool conversations (issue 42): a chat prompt whose line has "tools"
// (ingest.ParseChat reads its calls and results) is sent with its tools on
// every route: the chat endpoint's "tools" (tool_choice auto), /v1/tokenize
// with the messages and tools before /generate. The model's calls are read
// from the chat endpoint's tool_calls, or, through /generate, from its
// output by SGLang's POST /parse_function_call (with --tool-call-parser,
// or the parser the server runs), and written in the answer line as
// "tool_calls" (its "text" the text around them; output_ids as generated).
//
// A server that cannot take tools or tell the model's calls is refused
// before the first tool prompt is sent to it, naming the flags it needs:
// SGLang's chat endpoint without --tool-call-parser answers calls as text
// (its /server_info says which parser it runs; one that does not say is
// refused too); /generate needs a parser name for /parse_function_call;
// vLLM (without --enable-auto-tool-choice --tool-call-parser) and
// llama.cpp (without --jinja) refuse tools with a 400 that stops the run
// (client.ErrToolsRefused).
//
// Under --turns all (the default) a tool prompt is regenerated step by
// step on the model's own calls (toolturns.go); under --turns last one
// request regenerates its last assistant turn on the data's history (its
// trailing assistant turns are not sent).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"gendex/ingest"
	"gendex/ingest/gen/client"
)

// setTools keeps a chat prompt's tools (its line's raw "tools"). A tool
// conversation's request ends on its user or tool turn: trailing
// assistant turns (the data's answer) are not sent.
func (p *Prompt) setTools(raw json.RawMessage) error {
	tools, _, err := ingest.ParseTools(raw)
	switch {
	case err != nil:
		return err
	case tools == nil:
		return nil
	case p.Messages == nil:
		return errors.New(`the line has "tools", which gen sends only with a chat prompt (messages or conversations)`)
	}
	p.Tools = tools
	for len(p.Messages) > 0 && p.Messages[len(p.Messages)-1].Role == "assistant" {
		p.Messages = p.Messages[:len(p.Messages)-1]
	}
	if len(p.Messages) == 0 {
		return errors.New("no turns to answer")
	}
	return nil
}

// sampleTools reads the first prompt of each prompts file: whether each
// dataset (ds.tools), and so the run (has), has tool prompts (preflight
// then checks each server can take them).
func sampleTools(sets []*dsRun) (has bool) {
	for _, ds := range sets {
		for _, path := range ds.Prompts {
			f, err := os.Open(path)
			if err != nil {
				continue
			}
			ingest.ReadLines(io.LimitReader(f, 1<<20), func(line []byte, n int64) error {
				if p, err := ParsePrompt(line, "x", n); err == nil && p.Tools != nil {
					has, ds.tools = true, true
				}
				return errStop
			})
			f.Close()
		}
	}
	return has
}

// toolsCheck is what was found of one server's tool support, per route.
type toolsCheck struct {
	mu      sync.Mutex
	checked map[string]toolsFound
}

type toolsFound struct {
	parser string // the parser /parse_function_call is asked with
	err    error  // the stop, when the route cannot carry tools
}

func (tc *toolsCheck) reset() {
	tc.mu.Lock()
	tc.checked = nil
	tc.mu.Unlock()
}

// toolsReady checks once per route that s can carry tool prompts there
// (see the top of this file) and returns the parser /generate's output is
// parsed with, or the stop.
func (a *asker) toolsReady(ctx context.Context, s *server, c *client.Client, route string) (string, error) {
	tc := &s.tools
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if f, ok := tc.checked[route]; ok {
		return f.parser, f.err
	}
	f, err := a.checkTools(ctx, s, c, route)
	if err != nil {
		return "", err // not known: asked again next time
	}
	if tc.checked == nil {
		tc.checked = map[string]toolsFound{}
	}
	tc.checked[route] = f
	return f.parser, f.err
}

func (a *asker) checkTools(ctx context.Context, s *server, c *client.Client, route string) (toolsFound, error) {
	stop := func(format string, a ...any) toolsFound {
		return toolsFound{err: &stopError{msg: fmt.Sprintf(format, a...),
			hint: "gen never regenerates a tool conversation as text; no prompt was sent"}}
	}
	switch {
	case route == "/generate":
		parser := a.cfg.ToolCallParser
		if parser == "" {
			p, _, err := c.ToolParser(ctx)
			if err != nil {
				return toolsFound{}, err
			}
			parser = p
		}
		if parser == "" {
			return stop("%s (%s) runs no tool-call parser gen can name, so the calls in /generate's output cannot be read: give gen --tool-call-parser NAME (the server's parser for the model: qwen25, kimi_k2, glm45, qwen3_coder, ...), or %s",
				s.name, c.Flavor, client.NeedsFlags(c.Flavor)), nil
		}
		missing, err := s.routes.check(ctx, c, "/parse_function_call")
		if err != nil {
			return toolsFound{}, err
		}
		if missing != nil {
			return stop("%s (%s) has no POST /parse_function_call (HTTP %d), which reads the calls in /generate's output: use a newer SGLang, or --api chat with a server started with --tool-call-parser",
				s.name, c.Flavor, missing.Status), nil
		}
		return toolsFound{parser: parser}, nil
	case route == "/v1/chat/completions" && c.Flavor == client.FlavorSGLang:
		p, known, err := c.ToolParser(ctx)
		if err != nil {
			return toolsFound{}, err
		}
		switch {
		case !known:
			return stop("%s (%s) does not say which tool-call parser it runs (no tool_call_parser in GET /server_info or /get_server_info), so its chat endpoint may answer the model's calls as text: %s",
				s.name, c.Flavor, client.NeedsFlags(c.Flavor)), nil
		case p == "":
			return stop("%s (%s) runs no tool-call parser (tool_call_parser is null), so its chat endpoint answers the model's calls as text: %s",
				s.name, c.Flavor, client.NeedsFlags(c.Flavor)), nil
		}
		return toolsFound{parser: p}, nil
	}
	// vLLM and llama.cpp refuse tools they cannot take with a 400
	// (client.ErrToolsRefused), which stops the run at the first request.
	return toolsFound{}, nil
}

// preflightTools runs toolsReady for the route chat prompts take on s,
// when the run has tool prompts.
func (a *asker) preflightTools(ctx context.Context, s *server, c *client.Client) error {
	if !a.tools {
		return nil
	}
	s.tools.reset()
	_, err := a.toolsReady(ctx, s, c, routeFor(a.cfg.apiFor(c), shapeChat, s.tokenize.Load()))
	if client.KindOf(err) == client.Auth {
		return a.setupError(err)
	}
	var stop *stopError
	if errors.As(err, &stop) {
		return err
	}
	return nil // not known now: the first tool prompt asks again
}

// readCalls sets the calls of a /generate answer to tool prompt p from its
// text, by /parse_function_call with parser; the answer's text becomes the
// text around them.
func readCalls(ctx context.Context, c *client.Client, p *Prompt, parser string, res *client.Result) error {
	if res.Text == nil {
		return &client.Error{Kind: client.Setup, Server: c.Server(), Op: "POST /generate", Status: 200,
			Message: "the answer has no text, so its tool calls cannot be read (a server run with --skip-tokenizer-init)"}
	}
	calls, normal, err := c.ParseFunctionCall(ctx, *res.Text, parser, p.Tools)
	if err != nil {
		return err
	}
	if len(calls) > 0 {
		res.ToolCalls, res.Text = calls, &normal
	}
	return nil
}

// toolsFor checks, for a tool prompt, that s can carry it on route
// (toolsReady) and returns the parser for /generate's output. A stop
// stops the run (nothing is sent: context.Canceled); an error asking
// /server_info is the request's.
func (a *asker) toolsFor(ctx context.Context, s *server, c *client.Client, p *Prompt, route string) (string, error) {
	if p.Tools == nil {
		return "", nil
	}
	parser, err := a.toolsReady(ctx, s, c, route)
	var stop *stopError
	if errors.As(err, &stop) || client.KindOf(err) == client.Auth {
		a.ctl.abort(a.setupError(err))
		return "", context.Canceled
	}
	return parser, err
}

// TokenizeChat is TokenizeMessages with tools (export.ToolTokenizer).
func (t *lazyServer) TokenizeChat(ctx context.Context, msgs []client.Message, tools json.RawMessage) ([]int, error) {
	if err := t.ready(ctx); err != nil {
		return nil, err
	}
	return t.c.TokenizeChat(ctx, msgs, tools)
}
