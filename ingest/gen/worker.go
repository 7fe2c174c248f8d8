package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gendex/ingest/sglang"
)

// work answers jobs until there are none, or the run stops.
func (r *run) work() {
	for j := range r.jobs {
		if r.stopping() {
			continue // not started: answered by the next run
		}
		r.answer(j)
	}
}

// answer sends one prompt until it has an answer or a final error. One
// prompt is never in flight twice: retries happen here, one after another,
// each under a fresh rid.
func (r *run) answer(j job) {
	serverErrors := 0
	for attempt := 0; ; attempt++ {
		s, err := r.pool.pick(r.reqs)
		if err != nil {
			return // abandoned; answered by the next run
		}
		ctx, cancel := r.reqs, context.CancelFunc(func() {})
		if r.cfg.RequestTimeout > 0 {
			ctx, cancel = context.WithTimeout(r.reqs, r.cfg.RequestTimeout)
		}
		res, err := r.send(ctx, s, j)
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
		cancel()
		r.pool.release(s)
		if err == nil {
			s.done.Add(1)
			var tokens int64
			if res.CompletionTokens != nil {
				tokens = int64(*res.CompletionTokens)
			}
			line := res.AppendJSONL(make([]byte, 0, 256+8*len(res.OutputIDs)), j.p.ID)
			r.results <- result{ds: j.ds, line: line, tokens: tokens}
			return
		}
		var e *sglang.Error
		errors.As(err, &e)
		if timedOut { // the server is there but slow: an error, not an outage
			e = &sglang.Error{Kind: sglang.Transient, Server: s.url,
				Message: fmt.Sprintf("no answer within --request-timeout %s", r.cfg.RequestTimeout)}
			err = e
		}
		switch sglang.KindOf(err) {
		case sglang.Canceled:
			return
		case sglang.Auth:
			r.abort(fmt.Errorf("%w (check --api-key or $SGLANG_API_KEY)", err))
			return
		case sglang.Permanent:
			status, msg := 0, err.Error()
			if e != nil {
				status, msg = e.Status, e.Message
			}
			r.results <- r.errorLine(j.ds, j.p.ID, status, msg, s.url, attempt+1)
			return
		}
		if e != nil && e.Status == 0 && !timedOut {
			r.pool.markDown(r.reqs, s) // no answer at all: wait for the server
		} else if serverErrors++; serverErrors >= r.cfg.MaxAttempts {
			status, msg := 0, err.Error()
			if e != nil {
				status, msg = e.Status, e.Message
			}
			r.results <- r.errorLine(j.ds, j.p.ID, status, fmt.Sprintf("gave up after %d attempts: %s", serverErrors, msg), s.url, attempt+1)
			return
		}
		if r.stopping() {
			return
		}
		select {
		case <-time.After(r.cfg.Backoff.DelayFor(err, min(attempt, 6))):
		case <-r.stop.Done():
			return
		}
	}
}

// send makes one request for j on s, by the run's API and the prompt's shape.
func (r *run) send(ctx context.Context, s *server, j job) (*sglang.Result, error) {
	p := j.p
	sp := r.cfg.Sampling.Merge(p.Sampling)
	api := r.cfg.API
	ids := p.InputIDs
	if api == sglang.APIGenerate && p.Messages != nil && s.tokenize.Load() >= 0 {
		t, err := s.client.TokenizeMessages(ctx, p.Messages)
		switch {
		case errors.Is(err, sglang.ErrTokenizeUnsupported):
			s.tokenize.Store(-1)
			r.once("tokenize "+s.url, "gen: %s cannot turn messages into token ids (/v1/tokenize with messages); sending chat prompts to its /v1/chat/completions instead", s.url)
		case err != nil:
			return nil, err
		default:
			s.tokenize.Store(1)
			ids = t
		}
	}
	if len(ids) > 0 && s.ctxLen > 0 && sp.MaxNewTokens != nil {
		if room := s.ctxLen - len(ids); room > 0 && room < *sp.MaxNewTokens {
			sp.MaxNewTokens = &room
		}
	}
	switch {
	case api == sglang.APIGenerate && (ids != nil || p.Messages == nil):
		return s.client.Generate(ctx, sglang.GenerateRequest{InputIDs: ids, Text: p.Text, Sampling: sp})
	case api == sglang.APICompletions && p.Messages == nil:
		return s.client.Complete(ctx, sglang.CompletionRequest{Prompt: p.Text, PromptIDs: ids, Sampling: sp})
	}
	req := sglang.ChatRequest{Messages: p.Messages, Sampling: sp}
	switch {
	case p.Messages == nil && ids != nil:
		req.Messages = []sglang.Message{{Role: "user", Content: ""}}
		req.Extra = map[string]any{"input_ids": ids} // SGLang: pre-tokenized, no template
	case p.Messages == nil:
		req.Messages = []sglang.Message{{Role: "user", Content: p.Text}}
	}
	if api == sglang.APICompletions {
		r.once("completions chat", "gen: chat prompts (messages) go to /v1/chat/completions: /v1/completions has no chat template")
	}
	return s.client.Chat(ctx, req)
}

// errorLine builds an errors.jsonl line.
func (r *run) errorLine(ds *dsRun, id string, status int, msg, server string, attempts int) result {
	rec := struct {
		ID       string `json:"id"`
		Status   int    `json:"status,omitempty"`
		Error    string `json:"error"`
		Server   string `json:"server,omitempty"`
		Attempts int    `json:"attempts,omitempty"`
		FailedAt string `json:"failed_at"`
	}{id, status, msg, server, attempts, time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(rec) // ends in \n
	return result{ds: ds, line: b.Bytes(), isErr: true}
}
