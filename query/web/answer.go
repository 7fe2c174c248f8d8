package web

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"gendex/query"
)

// A message is one turn of the conversation as the answer page shows it.
type message struct {
	Role string
	Text string
	// Turn is the answer's turn that wrote it (0: the prompt's own).
	Turn int
	// Regenerated marks an assistant turn of the prompt that gen asked
	// again (--turns all): Original is what the prompt held.
	Regenerated bool
	Original    string
	Reasoning   string
	Finish      string
}

type fact struct {
	Label, Text string
	Unknown     bool
}

type answerView struct {
	Page           frame
	Dataset, ID    string
	Sample         string // which of the prompt's samples (gen --samples); "": the first, or the only
	Stage          string
	Back           string
	Prev, Next     string
	Facts          []fact
	Messages       []message
	Text           string
	HasText        bool
	NoText         string
	Reasoning      string
	Line           string
	LineError      string
	PromptLine     string
	HasPrompt      bool
	PromptError    string
	Conversational bool
	// TextInTurns: the text is the conversation's last turn, shown there.
	TextInTurns bool
	// Tools is a tool conversation, shown instead of Messages (tools.go).
	Tools     *toolView
	ToolError string // why the prompt's turns could not be read
}

// answer is one record's page: the index's facts about it, its prompt
// and conversation turn by turn, its text with the reasoning folded, and
// its stored line as it is, with links to the records before and after.
func (s *server) answer(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name, u, stage := q.Get("d"), unit{q.Get("id"), q.Get("sample")}, cmp.Or(q.Get("stage"), "raw")
	if u.sample == "0" || stage == "prompts" {
		u.sample = "" // a prompt's line is every sample's
	}
	id := u.id
	if name == "" || id == "" {
		s.fail(w, http.StatusBadRequest, errors.New("which answer? (/answer?d=DATASET&id=ID)"))
		return
	}
	a := &answerView{Page: s.page(name + " " + u.String()), Dataset: name, ID: id, Sample: u.sample, Stage: stage, Back: link("/dataset", "d", name, "view", viewOf(stage))}
	row, cols, err := s.neighbours(r, a)
	if err != nil {
		s.fail(w, http.StatusNotFound, err)
		return
	}
	a.Facts = factsOf(row, cols)
	line, err := s.ask(r.Context(), "show", "--stage", stage, "--sample", cmp.Or(u.sample, "0"), "--", name, id)
	if err != nil {
		a.LineError = err.Error()
	} else {
		a.Line = pretty(line.Line)
		s.readAnswer(a, line.Line)
	}
	turns := s.turnsOf(line) // once: the conversation and the text read them
	if p, err := s.ask(r.Context(), "show", "--stage", "prompts", "--", name, id); err == nil {
		a.HasPrompt, a.PromptLine = true, pretty(p.Line)
		if isToolConversation(turns) || len(turns) == 0 && hasTools(p.Line) {
			s.toolsOf(a, p.Line, line, turns)
		}
		if a.Tools == nil {
			a.Messages = conversation(promptMessages(p.Line), turns)
		}
	} else if !strings.Contains(err.Error(), " has no ") {
		a.PromptError = err.Error()
	}
	if a.Messages == nil && a.Tools == nil && line != nil {
		a.Messages = conversation(nil, turns)
	}
	a.Conversational = len(a.Messages) > 0 || a.Tools != nil
	if len(turns) > 0 && !a.HasText {
		// A conversation's answer is its last turn.
		last := turns[len(turns)-1]
		a.Text, a.HasText, a.NoText, a.Reasoning = last.Text, true, "", last.Reasoning
		a.TextInTurns = len(turns) > 1
	}
	a.TextInTurns = a.TextInTurns || a.Tools != nil
	s.render(w, "answer.html", a)
}

// toolsOf lays out the tool conversation of a prompt line and its answer
// line (nil: none) (tools.go), with the prompt's turns as gen reads them
// (Chat); when they cannot be read, the page says why and shows the turns
// as written. An answer of one request (gen --turns last) is the model's
// one step, for the prompt's last user turn.
func (s *server) toolsOf(a *answerView, prompt []byte, answer *query.Result, turns []turn) {
	if s.Chat == nil {
		return
	}
	chat, err := s.Chat(prompt)
	if err != nil {
		a.ToolError = "the prompt's turns as gen reads them: " + err.Error()
		return
	}
	var line []byte
	if answer != nil {
		line = answer.Line
	}
	single := len(turns) == 0 && line != nil && a.Stage == "raw"
	if single {
		turns = []turn{oneStep(line, a, chat)}
	}
	a.Tools = toolConversation(chat, turns, toolStopOf(line), single)
	if st := a.Tools.Stop; st != nil {
		a.Facts = append(a.Facts, fact{Label: "tool stop", Text: fmt.Sprintf("%s at step %d", st.Reason, st.Step)})
	}
}

// viewOf is the dataset view that lists a stage's records.
func viewOf(stage string) string {
	switch stage {
	case "errors", "excluded":
		return stage
	case "prompts":
		return "missing"
	}
	return "answers"
}

// neighbours finds the record in its stage's key order with the one
// before it and the one after it: the record before id, then the two
// from there.
func (s *server) neighbours(r *http.Request, a *answerView) ([]any, []string, error) {
	ctx := r.Context()
	prev, err := s.ask(ctx, "list", "--stage", a.Stage, "--before", a.ID, "--before-sample", cmp.Or(a.Sample, "0"), "--limit", "1", "--", a.Dataset)
	if err != nil {
		return nil, nil, err
	}
	args := []string{"list", "--stage", a.Stage, "--limit", "2"}
	if len(prev.Rows) > 0 {
		p, ps := unitOf(prev, prev.Rows[0])
		a.Prev = link("/answer", "d", a.Dataset, "id", p, "sample", ps, "stage", a.Stage)
		args = append(args, "--after", p, "--after-sample", cmp.Or(ps, "0"))
	}
	here, err := s.ask(ctx, append(args, "--", a.Dataset)...)
	if err != nil {
		return nil, nil, err
	}
	if len(here.Rows) == 0 || unitFrom(unitOf(here, here.Rows[0])) != (unit{a.ID, a.Sample}) {
		return nil, nil, fmt.Errorf("dataset %s has no %s record with id %q%s", a.Dataset, a.Stage, a.ID, unit{a.ID, a.Sample}.of())
	}
	if len(here.Rows) > 1 {
		n, ns := unitOf(here, here.Rows[1])
		a.Next = link("/answer", "d", a.Dataset, "id", n, "sample", ns, "stage", a.Stage)
	}
	return here.Rows[0], here.Columns, nil
}

var factLabels = map[string]string{
	"sample": "sample", "finish": "finish reason", "prompt_tokens": "prompt tokens", "completion_tokens": "completion tokens",
	"reasoning_tokens": "reasoning tokens", "finished": "finished", "message": "message", "source": "file:line",
}

func factsOf(row []any, cols []string) []fact {
	var out []fact
	for i, c := range cols {
		label, ok := factLabels[c]
		if !ok || i >= len(row) {
			continue
		}
		if c == "message" && row[i] == nil {
			continue
		}
		v := valueCell(c, row[i])
		out = append(out, fact{Label: label, Text: v.Text, Unknown: v.Unknown})
	}
	return out
}

// readAnswer fills the text and reasoning, and the model and server the
// line names.
func (s *server) readAnswer(a *answerView, line []byte) {
	var top map[string]json.RawMessage
	_ = json.Unmarshal(line, &top)
	model := str(top["model"])
	if model == "" {
		var batch struct {
			Response struct {
				Body struct {
					Model string `json:"model"`
				} `json:"body"`
			} `json:"response"`
		}
		_ = json.Unmarshal(line, &batch)
		model = batch.Response.Body.Model
	}
	for _, f := range []fact{{Label: "model", Text: model}, {Label: "server", Text: str(top["server"])}} {
		if f.Text == "" {
			f.Text, f.Unknown = "unknown", true
		}
		a.Facts = append(a.Facts, f)
	}
	if s.Read == nil || a.Stage != "raw" {
		return
	}
	ans, err := s.Read(line)
	if err != nil {
		a.NoText = err.Error()
		return
	}
	a.Facts = append(a.Facts, fact{Label: "shape", Text: ans.Shape})
	a.Text, a.HasText, a.NoText, a.Reasoning = ans.Text, ans.HasText, ans.NoText, ans.Reasoning
}

// str is a JSON string's value, or "".
func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// pretty indents a JSON line, or returns it as it is.
func pretty(line []byte) string {
	var b bytes.Buffer
	if json.Indent(&b, line, "", "  ") != nil {
		return string(line)
	}
	return b.String()
}

// promptMessages reads a prompt line's conversation: messages (role and
// content, a content of parts joined), ShareGPT's conversations (from and
// value), or one prompt string (prompt, text or input) as a user turn.
func promptMessages(line []byte) []message {
	var p struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Conversations []struct {
			From  string `json:"from"`
			Value string `json:"value"`
		} `json:"conversations"`
		Prompt json.RawMessage `json:"prompt"`
		Text   json.RawMessage `json:"text"`
		Input  json.RawMessage `json:"input"`
	}
	if json.Unmarshal(line, &p) != nil {
		return nil
	}
	var out []message
	for _, m := range p.Messages {
		out = append(out, message{Role: m.Role, Text: contentText(m.Content)})
	}
	roles := map[string]string{"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}
	for _, m := range p.Conversations {
		out = append(out, message{Role: cmp.Or(roles[m.From], m.From), Text: m.Value})
	}
	if out == nil {
		for _, raw := range []json.RawMessage{p.Prompt, p.Text, p.Input} {
			if t := str(raw); t != "" {
				return []message{{Role: "user", Text: t}}
			}
		}
	}
	return out
}

// contentText is a message's content: a string, or its text parts joined.
func contentText(raw json.RawMessage) string {
	if s := str(raw); s != "" {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Text != "" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		} else if p.Type != "" {
			fmt.Fprintf(&b, "[%s]", p.Type)
		}
	}
	return b.String()
}

// A turn is one answered turn of a conversation line (gendex's "turns");
// a tool conversation's step says the user turn it answers (from 0), its
// calls, and the prompt's tool turns (from 0) that answered them.
type turn struct {
	Text      string     `json:"text"`
	Reasoning string     `json:"reasoning_content"`
	Finish    string     `json:"finish_reason"`
	ToolCalls []stepCall `json:"tool_calls"`
	UserTurn  *int       `json:"user_turn"`
	Results   []int      `json:"results"`
}

// turnsOf reads the turns of a conversation answer line, or nil: each
// turn's text and reasoning by Read when there is one (a turn is an
// answer object of its own).
func (s *server) turnsOf(line *query.Result) []turn {
	if line == nil {
		return nil
	}
	var a struct {
		Turns []json.RawMessage `json:"turns"`
	}
	if json.Unmarshal(line.Line, &a) != nil {
		return nil
	}
	out := make([]turn, len(a.Turns))
	for i, raw := range a.Turns {
		_ = json.Unmarshal(raw, &out[i])
		if s.Read == nil {
			continue
		}
		if ans, err := s.Read(raw); err == nil {
			out[i].Text, out[i].Reasoning = ans.Text, ans.Reasoning
		}
	}
	return out
}

// conversation lays the answer's turns into the prompt's messages: when
// the answer holds one turn per assistant message of the prompt and one
// more (gen --turns all), each of the prompt's assistant turns is shown
// as the answer's, marked regenerated with the prompt's own folded under
// it; otherwise the prompt is shown as written and the answer's turns
// after it.
func conversation(prompt []message, turns []turn) []message {
	assistants := 0
	for _, m := range prompt {
		if m.Role == "assistant" {
			assistants++
		}
	}
	regenerate := len(turns) > 1 && len(turns) == assistants+1
	var out []message
	k := 0
	for _, m := range prompt {
		if regenerate && m.Role == "assistant" {
			t := turns[k]
			k++
			out = append(out, message{Role: "assistant", Text: t.Text, Turn: k, Regenerated: true, Original: m.Text, Reasoning: t.Reasoning, Finish: t.Finish})
			continue
		}
		out = append(out, m)
	}
	if len(turns) > 1 || regenerate {
		for ; k < len(turns); k++ {
			t := turns[k]
			out = append(out, message{Role: "assistant", Text: t.Text, Turn: k + 1, Reasoning: t.Reasoning, Finish: t.Finish})
		}
	}
	return out
}
