package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gendex/ingest/export"
	"gendex/ingest/gen/client"
)

// asker turns a job into a result: it asks the job's prompt of the
// servers until it has an answer or a final error, and sends the line to
// the writer. It owns the servers and their pool (connect.go, servers.go),
// what each is found to be and to have (learn, preflight.go, identity.go),
// the --concurrency slots, retries (retries.go) and crash suspects
// (isolate.go). It never writes a file nor the index, and reads no prompt
// file: its jobs come from the feeder, a conversation's turns and steps
// are taken by the conversations (talk), its results go to the writer.
// The run builds it (newRun), connects it (connect), starts its workers
// (start) and waits for them (wait).
type asker struct {
	ctl *control
	cfg *Config // read only
	// mon, once the run's state has started, is told of servers up and
	// down, retries, isolated prompts and identity changes (nil before).
	mon *monitor
	// shapes are the prompt shapes the run sends (readShapes) and tools
	// says it has tool prompts (sampleTools): preflight checks their
	// routes and tool support on each server.
	shapes [numShapes]bool
	tools  bool

	pool    *pool // the servers, once connect made them
	jobs    <-chan job
	results chan<- result
	talk    talker  // a conversation's turns and steps (turns.go, toolturns.go)
	aborts  aborter // the requests given up, stopped on the server (abort.go)
	workers sync.WaitGroup
	suspect chan struct{} // held by the one crash suspect in flight
	iso     isolation     // the crash suspects isolated (isolate.go)
	slots   chan struct{} // one per request in flight: Concurrency bounds them all
	sent    sentAny       // a prompt was sent (refused.go)
	// prompts counts the prompts sent as token ids: fed so (feeder) or
	// made so (sendOnce), for the size of the run's requests (limit.go).
	prompts promptTally

	// What the asker asks of the other parts, set by the run (newRun):
	// a redone answer's line marked (redo.go); the "gen" part of a
	// server's provenance, how the run asks it, and the checks of what a
	// server is against the answers held (provenance.go, place.go); the
	// early feeder's word that it found nothing to ask (earlyfeed.go).
	redoLine        func(j *job, line []byte) []byte
	askedOf         func(api client.API, ident map[string]any) map[string]any
	checkServerKind func(server string, simulated bool) error
	checkProvenance func(server, model string, prov []byte) error
	nothingFed      func() <-chan struct{}
}

// talker takes a conversation's job (job.conv, job.tc) to its end: the
// asker hands it those jobs, and it asks each turn or step through the
// asker (ask) and sends their lines to results.
type talker interface {
	answer(j *job)
}

// start starts the workers: Concurrency of them take jobs, and send each
// job's lines to results, until jobs is closed or the run stops.
func (a *asker) start(jobs <-chan job, results chan<- result) {
	a.jobs, a.results = jobs, results
	a.suspect = make(chan struct{}, 1)
	a.slots = make(chan struct{}, a.cfg.Concurrency)
	for range a.cfg.Concurrency {
		a.workers.Go(a.work)
	}
}

// wait returns once every worker (and suspect's goroutine) is done: no
// result is sent after it.
func (a *asker) wait() { a.workers.Wait() }

// work answers jobs until there are none, or the run stops.
func (a *asker) work() {
	for j := range a.jobs {
		if a.ctl.stopping() {
			continue // not started: answered by the next run
		}
		a.answer(j)
	}
}

// answer asks j's prompt until it has an answer or a final error, and
// sends its line; a conversation's job (j.conv, j.tc) goes to the
// conversations, which ask its turns through ask. One prompt is never in
// flight twice: retries, and a conversation's turns, happen here, one
// after another, each under a fresh rid. A prompt that was in flight when
// its server went away is handed, with the conversation's state, to a
// goroutine of its own that retries it alone among such suspects (the
// rest of that conversation too), and the worker takes the next prompt,
// once it was in flight at a second down (isolate.go); after one down it
// is sent again like any prompt.
func (a *asker) answer(j job) {
	if j.conv != nil || j.tc != nil {
		a.talk.answer(&j) // turns.go, toolturns.go
		return
	}
	res := a.ask(&j, j.p)
	if res == nil {
		return
	}
	tokens, unknown := countOf(res.CompletionTokens)
	line := unitLine(j.p, res.AppendJSONL(make([]byte, 0, 256+8*(len(res.OutputIDs)+len(res.PromptIDs))), j.p.ID))
	if j.redo {
		line = a.redoLine(&j, line)
	}
	out := result{ds: j.ds, line: line, tokens: tokens, unknown: unknown, redo: j.redo}
	out.truncated, out.ownLimit = j.cut(res.FinishReason)
	if !j.redo { // a redo's record comes in the final export pass (redo.go)
		decideExport(a.ctl.reqs, a.cfg.Export, &out, j.p)
	}
	a.results <- out
}

// countOf returns a count as a result carries it: the count, or 0 and
// unknown.
func countOf(n *int) (int64, bool) {
	if n == nil {
		return 0, true
	}
	return int64(*n), false
}

// ask sends p, the request j is at, until it has an answer, which it
// returns. It returns nil when it recorded a final error, or when the job
// was abandoned (the run stops) or handed to a suspect's goroutine.
func (a *asker) ask(j *job, p *Prompt) *client.Result {
	for {
		if j.suspect {
			select {
			case a.suspect <- struct{}{}:
			case <-a.ctl.stop.Done():
				return nil
			}
		}
		select { // one of --concurrency slots, whoever asks: a hard bound
		case a.slots <- struct{}{}:
		case <-a.ctl.stop.Done():
			a.unsuspect(j)
			return nil
		}
		s, err := a.pool.pick(a.ctl.reqs)
		if err != nil {
			<-a.slots
			a.unsuspect(j)
			return nil // abandoned; answered by the next run
		}
		ctx, cancel := a.ctl.reqs, context.CancelFunc(func() {})
		if a.cfg.RequestTimeout > 0 {
			ctx, cancel = context.WithTimeout(a.ctl.reqs, a.cfg.RequestTimeout)
		}
		actx, at := a.aborts.begin(ctx, s)
		fl := s.flights.begin(j.ds.Name, p.ID)
		res, err := a.send(actx, s, p)
		s.flights.end(fl, err)
		retiredMidway := a.aborts.end(at, err) // abort.go: given up, stopped on the server
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
		cancel()
		a.pool.ended(s, err)
		<-a.slots
		if !errors.Is(err, errTooLong) { // refused before it was sent
			j.attempts++
		}
		if (err == nil || retiredMidway) && s.retired.Load() {
			// s was found to be another server while this was in flight
			// (identity.go): the answer may be the new one's; ask again.
			a.unsuspect(j)
			continue
		}
		if err == nil {
			a.unsuspect(j)
			s.answered(res)
			res.Provenance = j.ds.provenanceDrawn(j.ds.provenanceOf(res.Provenance), p.mix)
			res.MixValues = p.mix.values()
			return res
		}
		var e *client.Error
		errors.As(err, &e)
		if timedOut { // the server is there but slow: an error, not an outage
			e = &client.Error{Kind: client.Transient, Server: s.name,
				Message: fmt.Sprintf("no answer within --request-timeout %s", a.cfg.RequestTimeout)}
			err = e
		}
		msg, status := err.Error(), 0
		if e != nil {
			msg, status = e.Message, e.Status
		}
		switch client.KindOf(err) {
		case client.Canceled:
			a.unsuspect(j)
			return nil
		case client.Auth, client.Setup:
			a.unsuspect(j)
			a.ctl.abort(a.setupError(err))
			return nil
		case client.Permanent:
			a.unsuspect(j)
			a.results <- a.jobError(j, status, msg, s.name)
			return nil
		}
		// No answer at all: a refused connection never reached the server
		// (not sent); otherwise ask the server whether it is still there:
		// if not, it went down with this prompt in flight (crashed).
		noAnswer := e != nil && e.Status == 0 && !timedOut
		notSent := noAnswer && !reachedServer(e)
		crashed := noAnswer && !notSent && a.wentDown(s)
		if notSent || crashed {
			a.pool.markDown(a.ctl.reqs, s) // wait for the server
		}
		// The next suspect goes once the server is known down: sent before,
		// it could be in flight at this down.
		a.unsuspect(j)
		switch {
		case crashed:
			j.crashes++
			if j.crashes >= a.cfg.MaxCrashes {
				a.results <- a.jobError(j, 0, fmt.Sprintf("the server went down %d times while this prompt was in flight (it may crash the server, e.g. out of memory; --max-crashes): last: %s", j.crashes, msg), s.name)
				return nil
			}
			if !j.suspect && j.crashes >= isolateAt(a.cfg.MaxCrashes) { // isolate.go
				a.retried(s, err, false) // by the suspect's goroutine
				j.suspect = true
				a.isolate(j, s)
				alone := *j
				a.workers.Go(func() { a.answer(alone); a.isolatedDone() })
				return nil
			}
			// Not isolated (yet): sent again with the others once a
			// server is up.
		case notSent:
			// wait for the server, without limit
		default:
			if j.serverErrors++; j.serverErrors >= a.cfg.MaxAttempts {
				a.results <- a.jobError(j, status, fmt.Sprintf("gave up after %d attempts: %s", j.serverErrors, msg), s.name)
				return nil
			}
		}
		if !a.retry(s, err, timedOut, a.cfg.Backoff.DelayFor(err, min(j.attempts-1, 6))) {
			return nil // the run stops
		}
	}
}

// unsuspect lets the next crash suspect go, when j held the turn.
func (a *asker) unsuspect(j *job) {
	if j.suspect {
		<-a.suspect
	}
}

// wentDown reports whether s no longer answers /health, asked right after a
// request to it got no answer.
func (a *asker) wentDown(s *server) bool {
	if !s.up.Load() {
		return true // already found down by another request
	}
	return s.client().Health(a.ctl.reqs) != nil && a.ctl.reqs.Err() == nil
}

// reachedServer reports whether a request that got no answer may have
// reached the server: anything but a refused connection, a name that does
// not resolve, or a stale keep-alive connection closed before the request
// was written.
func reachedServer(e *client.Error) bool {
	var dns *net.DNSError
	return !errors.Is(e.Err, syscall.ECONNREFUSED) && !errors.As(e.Err, &dns) &&
		!strings.Contains(e.Message, "server closed idle connection")
}

// clipMargin is kept free below the context length when max_new_tokens is
// clipped. SGLang rejects prompt + max_new_tokens > context length (400),
// older versions rejected equality too, its scheduler keeps prompts below
// max_req_input_len = context length - 6, and speculative decoding needs
// room for draft tokens beyond the last one kept.
const clipMargin = 16

// clipped returns max_new_tokens clipped so that promptLen + it stays
// clipMargin below ctxLen, or want when it fits or nothing sensible fits
// (the server's 400 then says why).
func clipped(want *int, ctxLen, promptLen int) *int {
	if want == nil || ctxLen <= 0 {
		return want
	}
	if room := ctxLen - clipMargin - promptLen; room > 0 && room < *want {
		return &room
	}
	return want
}

// send makes one request for p on s, by the server's API and the prompt's
// shape. Chat messages it turned into token ids itself (/v1/tokenize, for
// /generate) are the result's PromptIDs.
func (a *asker) send(ctx context.Context, s *server, p *Prompt) (*client.Result, error) {
	res, sent, err := a.sendOnce(ctx, s, p)
	if err != nil {
		return nil, err
	}
	if p.InputIDs != nil {
		res.PromptIDs = nil // the prompt line has them (vLLM returns them too)
	}
	if err := unread(s.name, p, sent, res); err != nil {
		a.ctl.abort(a.setupError(err))
		return nil, context.Canceled
	}
	return res, nil
}

// sendOnce is send's request; sent is how many token ids it sent as the
// prompt (0 for text or messages).
func (a *asker) sendOnce(ctx context.Context, s *server, p *Prompt) (res *client.Result, sent int, err error) {
	sp := a.cfg.Sampling.Merge(p.Sampling)
	a.applyMix(&sp, p)
	sampleSeed(&sp, p)
	c := s.client()
	api := a.cfg.apiFor(c)
	ids := p.InputIDs
	ctxLen := int(s.ctxLen.Load())
	if api == client.APIGenerate && p.Messages != nil && s.tokenize.Load() >= 0 {
		ids, err = a.optional(&s.tokenize, "tokenize "+s.name, func() ([]int, error) { return c.TokenizeChatAs(ctx, p.Messages, p.Tools, p.mix.template()) },
			"gen: %s cannot turn messages into token ids (/v1/tokenize with messages); sending chat prompts to its /v1/chat/completions instead", s.name)
		if err != nil {
			return nil, 0, err
		}
	}
	if x := a.cfg.Export; x != nil && x.Format == export.IDs && api == client.APIGenerate && ids == nil && p.Messages == nil && s.countTokens.Load() >= 0 {
		// An ids record needs the exact prompt ids: tokenize the text as
		// /generate would, and send the ids (kept in the answer line).
		ids, err = a.optional(&s.countTokens, "count "+s.name, func() ([]int, error) { return c.TokenizeText(ctx, p.Text) },
			"gen: %s has no /v1/tokenize: --export ids cannot know a text prompt's ids, so those answers get no record now (gendex export --server URL, with a server that has it, makes them)", s.name)
		if err != nil {
			return nil, 0, err
		}
	}
	counted, err := a.promptFits(ctx, s, c, p, ids) // promptfit.go
	if err != nil {
		return nil, 0, err
	}
	if p.InputIDs == nil {
		a.prompts.note(len(ids)) // made ids (the feeder counted the others)
	}
	textOut := ids == nil && p.Messages == nil && (api == client.APIGenerate || api == client.APICompletions)
	switch {
	case len(ids) > 0:
		sp.MaxNewTokens = clipped(sp.MaxNewTokens, ctxLen, len(ids))
	case textOut && ctxLen > 0 && sp.MaxNewTokens != nil && s.countTokens.Load() >= 0 &&
		len(p.Text)+textSlack+*sp.MaxNewTokens > ctxLen-clipMargin:
		// The text may not fit with max_new_tokens: count its tokens (a
		// token is at least one byte, so shorter texts always fit).
		if counted == 0 {
			t, err := a.optional(&s.countTokens, "count "+s.name, func() ([]int, error) { return c.TokenizeText(ctx, p.Text) },
				"gen: %s has no /v1/tokenize: text prompts are not clipped to its context length (one too long for max_new_tokens is recorded with the server's 400)", s.name)
			if err != nil {
				return nil, 0, err
			}
			counted = len(t)
		}
		if counted > 0 {
			sp.MaxNewTokens = clipped(sp.MaxNewTokens, ctxLen, counted)
		}
	}
	route, err := a.routeChecked(ctx, s, c, p)
	if err != nil {
		return nil, 0, context.Canceled // the run stops: nothing sent
	}
	if err := mixUntemplated(s, p, route); err != nil {
		a.ctl.abort(err)
		return nil, 0, context.Canceled // the run stops: nothing sent
	}
	if route != "/generate" && c.Flavor.DropsFields() {
		a.sayUnread(s, c, p)
	}
	parser, err := a.toolsFor(ctx, s, c, p, route)
	if err != nil {
		return nil, 0, err
	}
	a.sent.Store(true)
	switch route {
	case "/generate":
		if p.Tools != nil && sp.SkipSpecialTokens == nil {
			keep := false // call markers that are special tokens stay in the text
			sp.SkipSpecialTokens = &keep
		}
		req := client.GenerateRequest{InputIDs: ids, Sampling: sp}
		if ids == nil {
			req.Text = p.Text
		}
		res, err := c.Generate(ctx, req)
		if err == nil && p.InputIDs == nil && ids != nil {
			res.PromptIDs = ids
		}
		if err == nil && p.Tools != nil {
			err = readCalls(ctx, c, p, parser, res)
		}
		return res, len(ids), err
	case "/v1/completions":
		// Token ids as OpenAI's token-array prompt: every server reads
		// it (the chat endpoint would need SGLang's extension).
		res, err := c.Complete(ctx, client.CompletionRequest{Prompt: p.Text, PromptIDs: ids, Sampling: sp})
		return res, len(ids), err
	}
	req := client.ChatRequest{Messages: p.Messages, Sampling: sp, Tools: p.Tools}
	req.ChatTemplateKwargs, req.Extra = p.mix.template().Kwargs, p.mix.template().Extra()
	if p.Messages == nil {
		req.Messages = []client.Message{{Role: "user", Content: p.Text}}
	}
	if api == client.APICompletions {
		a.ctl.once("completions chat", "gen: chat prompts (messages) go to /v1/chat/completions: /v1/completions has no chat template")
	}
	res, err = c.Chat(ctx, req)
	return res, 0, err
}

// sayUnread says, once per key and server, the keys of p's own sampling
// that the server does not read (as preflight says of the flags): they are
// not sent, and its own behaviour applies.
func (a *asker) sayUnread(s *server, c *client.Client, p *Prompt) {
	_, ignored := p.Sampling.FieldsFor(c.Flavor)
	for _, k := range ignored {
		key := k
		if k == "min_tokens" {
			key = "min_tokens (min_new_tokens)" // the prompt line's name for it
		}
		a.ctl.once("ignored "+s.name+" "+k, "gen: %s (%s) does not read %s, set by prompt %s's sampling_params: not sent, its own behaviour applies (said once, for every prompt that sets it)",
			s.name, c.Flavor, key, p.ID)
	}
}

// optional makes call, a request to an endpoint a server may lack
// (/v1/tokenize), and keeps in state whether it has it (1) or not (-1).
// When it does not, it says so once (the message format with args) and
// returns no ids and no error.
func (a *asker) optional(state *atomic.Int32, key string, call func() ([]int, error), format string, args ...any) ([]int, error) {
	ids, err := call()
	switch {
	case errors.Is(err, client.ErrTokenizeUnsupported):
		state.Store(-1)
		a.ctl.once(key, format, args...)
		return nil, nil
	case err != nil:
		return nil, err
	}
	state.Store(1)
	return ids, nil
}

// textSlack bounds the special tokens (BOS and the like) a tokenizer adds
// to a text beyond one token per byte.
const textSlack = 8

// jobError builds the errors.jsonl line of j's final error; a
// conversation's message says which turn failed ("turn 2 of 3: ...").
func (a *asker) jobError(j *job, status int, msg, server string) result {
	if c := j.conv; c != nil {
		msg = fmt.Sprintf("turn %d of %d: %s", len(c.done)+1, c.k, msg)
	} else if tc := j.tc; tc != nil {
		msg = fmt.Sprintf("step %d (user turn %d of %d): %s", len(tc.steps)+1, tc.u+1, len(tc.segs), msg)
	}
	if a.mon != nil { // for the run's events (one per burst)
		a.mon.bursts.finalError(server, msg)
	}
	res := errorLine(j.ds, j.p, status, msg, server, j.attempts)
	res.closes = j.conv != nil && j.conv.counted || j.tc != nil && j.tc.counted
	return res
}

// errorLine builds an errors.jsonl line.
func errorLine(ds *dsRun, p *Prompt, status int, msg, server string, attempts int) result {
	rec := struct {
		ID       string `json:"id"`
		Status   int    `json:"status,omitempty"`
		Error    string `json:"error"`
		Server   string `json:"server,omitempty"`
		Attempts int    `json:"attempts,omitempty"`
		FailedAt string `json:"failed_at"`
	}{p.ID, status, msg, server, attempts, time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(rec) // ends in \n
	return result{ds: ds, line: unitLine(p, b.Bytes()), kind: errLine}
}

// unread returns a Setup error when a server's prompt_tokens show it did
// not read the prompt gen sent: far fewer tokens than the ids sent (sent),
// or than the text's length implies (a token of more than 50 bytes is no
// tokenizer's). Such an answer (an empty chat answered in place of token
// ids, say) is not kept, and no prompt is marked failed.
func unread(server string, p *Prompt, sent int, res *client.Result) error {
	if res.PromptTokens == nil {
		return nil
	}
	got := *res.PromptTokens
	var want string
	switch {
	case sent >= 8 && got*2 < sent:
		want = fmt.Sprintf("%d token ids", sent)
	case sent == 0:
		n := len(p.Text)
		for _, m := range p.Messages {
			n += len(m.Content)
		}
		if n >= 500 && got*50 < n {
			want = fmt.Sprintf("%d bytes of text", n)
		}
	}
	if want == "" {
		return nil
	}
	return &client.Error{Kind: client.Setup, Server: server, Op: "its answer to prompt " + p.ID, Status: 200,
		Message: fmt.Sprintf("prompt_tokens %d for a prompt of %s: the server did not read the prompt gen sent, so the answer is not kept", got, want)}
}
