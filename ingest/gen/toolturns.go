package gen

// Tool conversations regenerated on the model's own calls (--turns all;
// issue 42 item 3). A tool prompt is asked step by step, each step one
// request on the history regenerated so far: the prompt's system and user
// turns in their order, the model's own assistant turns, and after each of
// its calls the data's recorded result. The data's assistant turns are
// never sent.
//
// Pairing (speculators' rule, per user turn): the tool results the data
// recorded after user turn u answer the calls the model makes while
// answering u, in order: the k-th new call takes the k-th result not yet
// used, sent back as a tool turn with the new call's id (one the server
// did not give is "call_<step>_<k>", written in the answer) and its tool's
// name, guarded by that name (a result the data names, by its
// tool_call_id's call or a Hermes name, answers only a call of that tool).
// An answer without calls ends user turn u; the next user turn follows.
//
// Where the data ends at the assistant's call with no result recorded (the
// shape of most function-calling sets: a query, the tools, the call), the
// model's calls past the last user turn's results are compared with the
// data's open calls, in order: calls of those tools end the conversation
// with no stop, at the model's calls, as the data's ends.
//
// A stop: when the model departs from the data, the conversation ends at
// that step, with the model's own turn last, and its line says why
// ("tool_stop": {"reason", "step", "detail"}):
//
//	other_tool  a call of another tool than the result recorded for it,
//	            or than the call the data ends at
//	more_calls  more calls than results left for the user turn (and, at
//	            the last, calls the data ends at)
//	no_call     an answer in text where the data called, at the last user
//	            turn (a result left, or the data ends at its call)
//	bad_arguments  a call whose arguments are not a JSON object (no server
//	            takes it back in the history)
//
// (At an earlier user turn an answer in text is the model's choice: the
// results left are not used, and the next user turn follows.) An answer cut
// at the token limit ends the conversation too (finish_reason length, as
// any cut answer). export keeps a stopped conversation's record unless
// --exclude-tool-stops, which excludes it as tool_stop.
//
// The raw line is a conversation line (turns.go) whose turns are the
// steps, each with "user_turn" (from 0) and "results" (the indexes, among
// the prompt's tool turns from 0, of the results that answered its calls);
// the last step alone keeps "prompt_ids". Each step before the last is
// written to turns.jsonl as it is answered (a turn line ID#n, toolsteps.go),
// and the raw line replaces them as a plain conversation's does: a
// conversation interrupted mid-way (SIGKILL, a crash, Ctrl-C) goes on from
// its first step not recorded, on the recorded steps' history, and a redo
// keeps the steps before the one it asks again.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"gendex/ingest/gen/client"
	"gendex/store"
)

// The tool stop reasons (the index counts them: store.Record.ToolStop).
const (
	StopOtherTool = store.ToolStopOtherTool
	StopMoreCalls = store.ToolStopMoreCalls
	StopNoCall    = store.ToolStopNoCall
	StopBadArgs   = store.ToolStopBadArgs
)

type toolResult struct {
	content, name string
	at            int // its index among the prompt's tool turns
}

type toolStep struct {
	res     *client.Result // nil once written as a turn line, or read from one
	user    int
	results []int
	t       turnAnswer // its answer object and counts, once written or read
}

type toolStop struct {
	reason, detail string
	step           int
}

// toolConv is a tool conversation being regenerated; only the worker that
// holds its job touches it.
type toolConv struct {
	leads   [][]client.Message // per user turn: the turns that open it (system turns before it, then it)
	segs    [][]toolResult     // per user turn: the data's results after it
	u, used int                // the user turn being answered, and its results used
	// open are the data's calls left without a result at its end (at the
	// last user turn, after its results; Prompt.open).
	open    []client.ToolCall
	history []client.Message
	steps   []toolStep
	stop    *toolStop
	// counted reports whether the conversation is counted in its
	// dataset's halfDone (as conv.counted).
	counted bool
}

func newToolConv(p *Prompt) *toolConv {
	tc := &toolConv{open: p.open}
	var pending []client.Message
	tools := 0
	for _, m := range p.Messages {
		switch m.Role {
		case "assistant":
		case "tool":
			if n := len(tc.segs); n > 0 {
				tc.segs[n-1] = append(tc.segs[n-1], toolResult{content: m.Content, name: m.Name, at: tools})
			}
			tools++
		case "user":
			tc.segs = append(tc.segs, nil)
			tc.leads = append(tc.leads, append(pending, m))
			pending = nil
		default:
			pending = append(pending, m)
		}
	}
	if n := len(tc.leads); n > 0 {
		tc.leads[n-1] = append(tc.leads[n-1], pending...)
		tc.history = append(tc.history, tc.leads[0]...)
	}
	return tc
}

// prompt is the request of the conversation's next step.
func (tc *toolConv) prompt(p *Prompt) *Prompt {
	tp := *p
	tp.Messages = tc.history
	return &tp
}

// take takes the answer to the current step; it reports whether the
// conversation is over (answered, cut, stopped, or ended at the model's
// calls where the data's ends at its own).
func (tc *toolConv) take(res *client.Result) bool {
	n := len(tc.steps) + 1
	step := toolStep{res: res, user: tc.u}
	text := ""
	if res.Text != nil {
		text = *res.Text
	}
	for k := range res.ToolCalls {
		if res.ToolCalls[k].ID == "" {
			res.ToolCalls[k].ID = "call_" + strconv.Itoa(n) + "_" + strconv.Itoa(k+1)
		}
	}
	tc.history = append(tc.history, client.Message{Role: "assistant", Content: text, ToolCalls: res.ToolCalls})
	defer func() { tc.steps = append(tc.steps, step) }()
	calls := res.ToolCalls
	seg := tc.segs[tc.u][tc.used:]
	switch {
	case res.FinishReason == "length":
		return true
	case len(calls) == 0:
		if tc.stop = tc.noCall(n); tc.stop != nil {
			return true
		}
		tc.u, tc.used = tc.u+1, 0
		if tc.u == len(tc.segs) {
			return true
		}
		tc.history = append(tc.history, tc.leads[tc.u]...)
		return false
	case badArgs(calls) > 0:
		k := badArgs(calls)
		tc.stop = &toolStop{StopBadArgs, fmt.Sprintf("step %d: call %d (%s): arguments %q are not a JSON object", n, k, calls[k-1].Function.Name, calls[k-1].Function.Arguments), n}
		return true
	case len(calls) > len(seg):
		// Past the results: the data's own calls left open at its end,
		// or a departure.
		tc.stop = tc.callsPast(n, calls, seg)
		return true
	}
	if tc.stop = otherTool(n, calls, seg, nil); tc.stop != nil {
		return true
	}
	for k, c := range calls {
		tc.history = append(tc.history, client.Message{Role: "tool", Content: seg[k].content, ToolCallID: c.ID, Name: c.Function.Name})
		step.results = append(step.results, seg[k].at)
	}
	tc.used += len(calls)
	return false
}

// last reports whether the user turn being answered is the prompt's last.
func (tc *toolConv) last() bool { return tc.u == len(tc.segs)-1 }

// noCall is the stop of an answer in text at step n: a no_call where the
// data called at the last user turn (a result left, or its calls left
// open at its end), else none.
func (tc *toolConv) noCall(n int) *toolStop {
	if !tc.last() {
		return nil
	}
	if left := len(tc.segs[tc.u]) - tc.used; left > 0 {
		return &toolStop{StopNoCall, fmt.Sprintf("step %d: the model answered in text where the data called a tool (%d recorded result(s) left for user turn %d)", n, left, tc.u+1), n}
	}
	if len(tc.open) > 0 {
		return &toolStop{StopNoCall, fmt.Sprintf("step %d: the model answered in text where the data ends calling %s", n, callNames(tc.open)), n}
	}
	return nil
}

// callsPast is the end of step n, whose calls outnumber the results seg
// left for the user turn: at the last user turn, calls of the tools the
// data's conversation ends calling (its open calls, in order, after the
// results) end it with no stop, as the data's ends: the record ends at the
// model's calls. Otherwise more_calls, or other_tool for a call of another
// tool.
func (tc *toolConv) callsPast(n int, calls []client.ToolCall, seg []toolResult) *toolStop {
	if !tc.last() || len(calls) > len(seg)+len(tc.open) {
		detail := fmt.Sprintf("step %d: the model made %d call(s), the data has %d result(s) left for user turn %d", n, len(calls), len(seg), tc.u+1)
		if tc.last() && len(tc.open) > 0 {
			detail += fmt.Sprintf(" and ends calling %s", callNames(tc.open))
		}
		return &toolStop{StopMoreCalls, detail, n}
	}
	return otherTool(n, calls, seg, tc.open)
}

// otherTool is the other_tool stop of step n when one of its calls is not
// of the tool the data has next for it: the k-th call takes the k-th
// result left (seg; a result with no name takes any call), then the data's
// open calls in order. nil when each call is of its tool.
func otherTool(n int, calls []client.ToolCall, seg []toolResult, open []client.ToolCall) *toolStop {
	for k, c := range calls {
		if k < len(seg) {
			if r := seg[k]; r.name != "" && r.name != c.Function.Name {
				return &toolStop{StopOtherTool, fmt.Sprintf("step %d: call %d: the model called %s where the data's result is %s's", n, k+1, c.Function.Name, r.name), n}
			}
			continue
		}
		if want := open[k-len(seg)].Function.Name; want != c.Function.Name {
			return &toolStop{StopOtherTool, fmt.Sprintf("step %d: call %d: the model called %s where the data ends calling %s", n, k+1, c.Function.Name, want), n}
		}
	}
	return nil
}

// callNames names calls: "a", "a, b".
func callNames(calls []client.ToolCall) string {
	names := make([]string, len(calls))
	for k, c := range calls {
		names[k] = c.Function.Name
	}
	return strings.Join(names, ", ")
}

// answerTools asks j's tool conversation step by step (see above), from
// its first step not recorded (j.tc, recordedTools), sending each step's
// turn line as it is answered and the raw line with its last; it returns
// when the conversation is over, failed for good, or left for the next
// run. A job handed to a suspect's goroutine (worker.go) keeps j.tc, so
// that goroutine goes on from the same step.
func (cv *conversations) answerTools(j *job) {
	tc := j.tc
	if len(tc.segs) == 0 {
		cv.ask.results <- cv.ask.jobError(j, 0, "the conversation has no user turn to answer", "")
		return
	}
	for {
		res := cv.ask.ask(j, tc.prompt(j.p))
		if res == nil {
			return
		}
		if tc.take(res) {
			cv.ask.results <- cv.toolResult(j, tc)
			return
		}
		cv.ask.results <- cv.toolStepLine(j, tc)
		if cv.ctl.stopping() {
			return
		}
		j.tries = tries{suspect: j.suspect}
	}
}

// stepAnswer is a step's answer object in the conversation line (and,
// with the id and its number before it, its turn line), with its counts.
func stepAnswer(res *client.Result, user int, results []int) turnAnswer {
	t := turnAnswer{counts: [4]int64{count(res.PromptTokens), count(res.CompletionTokens), count(res.CachedTokens), count(res.ReasoningTokens)}}
	obj := append([]byte{'{'}, res.AppendFields(nil)...)
	obj = fmt.Appendf(obj, `,"user_turn":%d,"results":[`, user)
	for k, at := range results {
		if k > 0 {
			obj = append(obj, ',')
		}
		obj = strconv.AppendInt(obj, int64(at), 10)
	}
	t.obj = append(obj, "]}"...)
	return t
}

// toolStepLine is the turn line of the step tc has just taken, which did
// not end the conversation: {"id":ID,"turn":n, the step's answer object's
// members}, keyed ID#n in the turns stage, without "prompt_ids" (the last
// step's alone).
func (cv *conversations) toolStepLine(j *job, tc *toolConv) result {
	n := len(tc.steps)
	s := &tc.steps[n-1]
	s.res.PromptIDs = nil
	s.t = stepAnswer(s.res, s.user, s.results)
	s.res = nil
	line := make([]byte, 0, len(s.t.obj)+64)
	line = append(line, `{"id":`...)
	line = client.AppendJSONString(line, j.p.ID)
	line = fmt.Appendf(line, `,"turn":%d,`, n)
	line = append(line, s.t.obj[1:]...)
	line = unitLine(j.p, append(line, '\n'))
	if j.redo {
		line = cv.redoLine(j, line)
	}
	opens := !tc.counted
	tc.counted = true
	return result{ds: j.ds, line: line, kind: turnLine, tokens: max(s.t.counts[1], 0), opens: opens}
}

// toolResult is the raw line of j's finished tool conversation, and under
// --export its record or exclusion. Its earlier steps' tokens were counted
// with their turn lines (by this run or the one that wrote them).
func (cv *conversations) toolResult(j *job, tc *toolConv) result {
	turns := make([]turnAnswer, len(tc.steps))
	for i, s := range tc.steps[:len(tc.steps)-1] {
		turns[i] = s.t
	}
	ls := tc.steps[len(tc.steps)-1]
	last := ls.res
	turns[len(turns)-1] = stepAnswer(last, ls.user, ls.results)
	line := unitLine(j.p, conversationLine(j.p.ID, turns, last))
	if st := tc.stop; st != nil {
		line = line[:len(line)-2] // "}\n"
		line = fmt.Appendf(line, `,"tool_stop":{"reason":"%s","step":%d,"detail":`, st.reason, st.step)
		line = client.AppendJSONString(line, st.detail)
		line = append(line, "}}\n"...)
		cv.stops.add(st.reason)
	}
	if j.redo {
		line = cv.redoLine(j, line)
	}
	out := result{ds: j.ds, line: line, tokens: max(turns[len(turns)-1].counts[1], 0), unknown: sum(turns, 1) == store.Unknown,
		closes: tc.counted, redo: j.redo}
	out.truncated, out.ownLimit = j.cut(last.FinishReason)
	if !j.redo {
		decideExport(cv.ctl.reqs, cv.cfg.Export, &out, j.p)
	}
	return out
}

// stopCounts counts the tool conversations this run stopped, by reason.
type stopCounts struct {
	mu sync.Mutex
	by map[string]int64
}

func (s *stopCounts) add(reason string) {
	s.mu.Lock()
	if s.by == nil {
		s.by = map[string]int64{}
	}
	s.by[reason]++
	s.mu.Unlock()
}

// text says the stops for the summary ("" for none).
func (s *stopCounts) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	var parts []string
	for _, reason := range []string{StopOtherTool, StopMoreCalls, StopNoCall, StopBadArgs} {
		if c := s.by[reason]; c > 0 {
			n += c
			parts = append(parts, fmt.Sprintf("%s %d", reason, c))
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("gen: tool conversations: %d stopped where the model departed from the data (%s), each ending with the model's own turn; their raw lines say why (\"tool_stop\"), and --exclude-tool-stops excludes their records", n, strings.Join(parts, ", "))
}

// badArgs returns the first call (from 1) whose arguments are not a JSON
// object, or 0.
func badArgs(calls []client.ToolCall) int {
	for k, c := range calls {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(c.Function.Arguments), &obj) != nil || obj == nil {
			return k + 1
		}
	}
	return 0
}
