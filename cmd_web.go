package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"gendex/ingest"
	"gendex/query"
	"gendex/query/guard"
	"gendex/query/web"
)

// runWeb serves the web view of the index (package web) until Ctrl-C: a
// reader like the shell, through the writer's socket while one runs, else
// the file read-only, so it never holds the writer.
func runWeb(ctx context.Context, c *call, args []string) error {
	fs := c.flags()
	listen := fs.String("listen", "127.0.0.1:8765", "serve the page on HOST:PORT (loopback when HOST is empty), with a token: $GENDEX_TOKEN, else a random one, in the URL printed on a terminal, else kept in <index>.web-PORT.token, a file only you can read, its path in the URL printed (the file is removed at the end); beyond loopback $GENDEX_TOKEN must be set")
	every := fs.Duration("every", 5*time.Second, "how often an open page updates its numbers")
	rest, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("web takes no arguments (give the index with --db)")
	}
	if *every < 500*time.Millisecond {
		return usagef("web --every %s: want at least 500ms", *every)
	}
	// A token always: loopback is no user boundary (anyone on the node can
	// connect). $GENDEX_TOKEN, else a random one, said by tokenSay.
	token, chosen := c.env.Getenv("GENDEX_TOKEN"), true
	if token == "" {
		token, chosen = guard.NewToken(), false
	}
	ln, err := webListen(*listen, chosen)
	if err != nil {
		return err
	}
	defer ln.Close()
	asker := newAsker(c.db)
	defer asker.Close()
	// The first question says at once whether there is an index to show.
	q, _ := query.Parse([]string{"datasets"})
	if err := asker.Ask(ctx, q, c.env.Now(), &query.Collect{}); err != nil {
		return err
	}
	h := web.Handler(web.Options{Ask: asker, Read: readAnswer, Chat: readChat, Now: c.env.Now, Token: token, Hosts: guard.ForListen(*listen),
		Index: absPath(c.db), Every: *every})
	srv := guard.NewServer(h, webTimeouts(c.env))
	conns, note := guard.ConnCap(1, guard.DefaultReserve)
	if note != "" {
		fmt.Fprintf(c.env.Stderr, "gendex web: %s\n", note)
	}
	url := fmt.Sprintf("http://%s/?token=$GENDEX_TOKEN (once: a cookie keeps it)", ln.Addr())
	if !chosen {
		// The token made here: in the URL on a terminal, else in a file
		// only the user reads, beside the index (tokenSay).
		say := newTokenSay(c.env.StdoutTTY, c.db, fmt.Sprintf("web-%d", ln.Addr().(*net.TCPAddr).Port))
		said, err := say.say(token)
		if err != nil {
			return fmt.Errorf("web: %w", err)
		}
		defer say.remove()
		url = fmt.Sprintf("http://%s/?token=%s", ln.Addr(), said)
		if said != token {
			url += " (once: a cookie keeps it)"
		}
	}
	fmt.Fprintf(c.env.Stdout, "gendex web: the run in %s on %s; Ctrl-C to stop\n", c.db, url)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(guard.Limit(ln, conns)) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		return nil
	}
}

// webTimeouts are guard's defaults, but for a test hook: $GENDEX_WEB_IDLE
// (a duration) is the header and idle timeouts, so that a whole-binary
// test sees an idle connection closed in a second.
func webTimeouts(env *Env) guard.Timeouts {
	d, _ := time.ParseDuration(env.Getenv("GENDEX_WEB_IDLE"))
	return guard.Timeouts{Header: d, Idle: d}
}

// webListen listens on addr (":PORT" is loopback), refusing an address
// other machines reach unless the user chose the token ($GENDEX_TOKEN):
// beyond loopback it travels the network in the clear.
func webListen(addr string, chosen bool) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usagef("web --listen %q: want HOST:PORT or :PORT", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("web: %w (another program holds the port? give --listen another)", err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !chosen && (!ok || !a.IP.IsLoopback()) {
		ln.Close()
		return nil, usagef("web --listen %s is reachable from other machines: set GENDEX_TOKEN to a secret (open the page once as URL?token=SECRET), or listen on 127.0.0.1 and reach it with ssh -L", addr)
	}
	return ln, nil
}

// readAnswer reads an answer line's text for the page, by ingest's rules
// for every shape it reads.
func readAnswer(line []byte) (web.Answer, error) {
	a, err := ingest.ReadAnswer(line, nil)
	if err != nil {
		return web.Answer{}, err
	}
	out := web.Answer{Shape: a.Shape, NoText: a.NoText, Reasoning: a.Reasoning}
	switch {
	case a.Text != nil:
		out.Text, out.HasText = *a.Text, true
	case a.TextRaw != nil:
		s, ok := ingest.DecodeString(a.TextRaw)
		if !ok {
			return out, errors.New("its text is not a JSON string")
		}
		out.Text, out.HasText = s, true
	}
	return out, nil
}

// readChat reads a chat prompt line's turns (messages or conversations,
// with its tools) as gen reads them, by ingest.ParseChat: calls and their
// results paired, every call with an id.
func readChat(line []byte) ([]web.ChatTurn, error) {
	var p struct {
		Messages      []json.RawMessage `json:"messages"`
		Conversations []json.RawMessage `json:"conversations"`
		Tools         json.RawMessage   `json:"tools"`
	}
	if err := json.Unmarshal(line, &p); err != nil {
		return nil, err
	}
	raw, key := p.Messages, "messages"
	if raw == nil {
		raw, key = p.Conversations, "conversations"
	}
	ts, _, err := ingest.ParseChat(raw, p.Tools)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	out := make([]web.ChatTurn, len(ts))
	for i, t := range ts {
		out[i] = web.ChatTurn{Role: t.Role, Content: t.Content, CallID: t.ToolCallID, Name: t.Name}
		for _, c := range t.ToolCalls {
			out[i].Calls = append(out[i].Calls, web.Call{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
	}
	return out, nil
}
