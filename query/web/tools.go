package web

import (
	"encoding/json"
	"fmt"
)

// A tool conversation's answer page (a chat prompt with "tools", answered
// step by step: gen's tool conversations) shows it as a reviewer reads
// it: each user turn with the turns that open it, then, side by side, the
// data's trajectory after it (the prompt's assistant turns) and the
// model's (its steps for that user turn); under each turn its calls, each
// with the result it got beside it; and where gen stopped, the stop with
// its reason. Everything shown is text (html/template escapes it).

// A ChatTurn is one turn of a chat prompt as gen reads it (Options.Chat):
// an assistant turn's calls, a tool turn's call id and tool name, the
// results paired with their calls.
type ChatTurn struct {
	Role, Content string
	Calls         []Call
	CallID, Name  string // a tool turn's: the call it answers
}

// A Call is one tool call: its id, its tool's name and its arguments (a
// JSON string, as written).
type Call struct{ ID, Name, Arguments string }

// toolView is the tool conversation of an answer page.
type toolView struct {
	Rounds []toolRound
	Stop   *toolStop
}

// A toolRound is a user turn of a tool conversation: the turns that open
// it (system turns, then the user turn), the data's assistant turns after
// it and the model's steps that answered it.
type toolRound struct {
	Lead  []message
	Data  []toolTurn
	Model []toolTurn
	Note  string // how the model's side came to be (why it has no step)
}

// A toolTurn is one assistant turn: the data's, or the model's step.
type toolTurn struct {
	Step                    int // the model's step, from 1 (0: the data's turn)
	Text, Reasoning, Finish string
	Calls                   []callView
	Stop                    string // the stop at this step, with its reason
}

// A callView is one call with the result it got.
type callView struct {
	ID, Name, Arguments string
	Result, ResultName  string
	HasResult           bool
	NoResult            string // why it has none
}

// toolStop is an answer line's "tool_stop".
type toolStop struct {
	Reason string `json:"reason"`
	Step   int    `json:"step"`
	Detail string `json:"detail"`
}

// stepCall is a call as an answer's step holds it.
type stepCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// isToolConversation reports whether an answer's turns are a tool
// conversation's steps (each says the user turn it answers).
func isToolConversation(turns []turn) bool {
	return len(turns) > 0 && turns[0].UserTurn != nil
}

// toolStopOf reads an answer line's "tool_stop", nil when it has none.
func toolStopOf(line []byte) *toolStop {
	var a struct {
		Stop *toolStop `json:"tool_stop"`
	}
	if json.Unmarshal(line, &a) != nil || a.Stop == nil {
		return nil
	}
	if a.Stop.Reason == "" {
		a.Stop.Reason = "unknown"
	}
	return a.Stop
}

// toolConversation lays out a tool conversation: the prompt's turns (as
// gen reads them) in rounds, one per user turn, with the data's assistant
// turns and the model's steps (turns) of each; stop is the line's
// tool_stop (nil: none).
func toolConversation(prompt []ChatTurn, turns []turn, stop *toolStop, single bool) *toolView {
	v := &toolView{Stop: stop}
	var results []ChatTurn // the prompt's tool turns, in order (a step's results index them)
	var pending []message
	for i, t := range prompt {
		switch t.Role {
		case "user":
			v.Rounds = append(v.Rounds, toolRound{Lead: append(pending, message{Role: "user", Text: t.Content})})
			pending = nil
		case "assistant":
			if len(v.Rounds) == 0 {
				v.Rounds = append(v.Rounds, toolRound{})
			}
			r := &v.Rounds[len(v.Rounds)-1]
			r.Data = append(r.Data, dataTurn(t, prompt[i+1:]))
		case "tool":
			results = append(results, t)
		default:
			pending = append(pending, message{Role: t.Role, Text: t.Content})
		}
	}
	if len(pending) > 0 {
		v.Rounds = append(v.Rounds, toolRound{Lead: pending})
	}
	last := 0 // the last user turn the model answered (from 0)
	for n, t := range turns {
		u := 0
		if t.UserTurn != nil {
			u = max(*t.UserTurn, 0)
		}
		for u >= len(v.Rounds) {
			v.Rounds = append(v.Rounds, toolRound{})
		}
		last = u
		step := toolTurn{Step: n + 1, Text: t.Text, Reasoning: t.Reasoning, Finish: t.Finish}
		for k, c := range t.ToolCalls {
			cv := callView{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments}
			switch {
			case k < len(t.Results) && t.Results[k] >= 0 && t.Results[k] < len(results):
				r := results[t.Results[k]]
				cv.Result, cv.ResultName, cv.HasResult = r.Content, r.Name, true
			case k < len(t.Results):
				cv.NoResult = fmt.Sprintf("result %d of the prompt's tool turns, which it does not have", t.Results[k]+1)
			case stop != nil && stop.Step == n+1:
				cv.NoResult = "no result: the conversation stopped here (" + stop.Reason + ")"
			case n+1 == len(turns) && endsAtCall(v.Rounds[u].Data):
				cv.NoResult = "no result: the data records none (it ends at its call), nor does the conversation"
			default:
				cv.NoResult = "no result sent back: the conversation ended here"
			}
			step.Calls = append(step.Calls, cv)
		}
		if stop != nil && stop.Step == n+1 {
			step.Stop = stop.Reason + ": " + stop.Detail
		}
		v.Rounds[u].Model = append(v.Rounds[u].Model, step)
	}
	for u := range v.Rounds {
		r := &v.Rounds[u]
		if len(r.Lead) == 0 || r.Lead[len(r.Lead)-1].Role != "user" {
			continue
		}
		switch {
		case single && len(r.Model) > 0:
			r.Note = "one request, on the data's turns up to its last assistant turn (gen --turns last)"
		case len(r.Model) > 0:
		case len(turns) == 0:
			r.Note = "not asked"
		case single:
			r.Note = "no step: the data's turns were sent as the history (one request: gen --turns last)"
		case u < last:
			r.Note = "no step: the model answered the next user turn"
		case stop != nil:
			r.Note = fmt.Sprintf("not asked: the conversation stopped at step %d (%s)", stop.Step, stop.Reason)
		default:
			r.Note = fmt.Sprintf("not asked: the conversation ended at step %d (%s)", len(turns), turns[len(turns)-1].Finish)
		}
	}
	return v
}

// endsAtCall reports whether the data's turns end at a call without a
// result (a function-calling set: a query, the tools, the call).
func endsAtCall(data []toolTurn) bool {
	if len(data) == 0 {
		return false
	}
	calls := data[len(data)-1].Calls
	return len(calls) > 0 && !calls[len(calls)-1].HasResult
}

// dataTurn is the data's assistant turn t with its calls, each with the
// result that answers it among the tool turns after t (after, up to the
// next turn of another role).
func dataTurn(t ChatTurn, after []ChatTurn) toolTurn {
	out := toolTurn{Text: t.Content}
	answered := make([]bool, len(t.Calls))
	for _, c := range t.Calls {
		out.Calls = append(out.Calls, callView{ID: c.ID, Name: c.Name, Arguments: c.Arguments, NoResult: "no result recorded in the data"})
	}
	for _, r := range after {
		if r.Role != "tool" {
			break
		}
		for k, c := range t.Calls {
			if !answered[k] && c.ID == r.CallID {
				answered[k] = true
				cv := &out.Calls[k]
				cv.Result, cv.ResultName, cv.HasResult, cv.NoResult = r.Content, r.Name, true, ""
				break
			}
		}
	}
	return out
}

// hasTools reports whether a prompt line has "tools" (a tool prompt).
func hasTools(line []byte) bool {
	var p struct {
		Tools json.RawMessage `json:"tools"`
	}
	return json.Unmarshal(line, &p) == nil && len(p.Tools) > 0 && string(p.Tools) != "null"
}

// oneStep is an answer of one request to a tool prompt as the model's one
// step: its text and calls, for the prompt's last user turn.
func oneStep(line []byte, a *answerView, chat []ChatTurn) turn {
	t := turn{Text: a.Text, Reasoning: a.Reasoning}
	_ = json.Unmarshal(line, &struct {
		Finish    *string     `json:"finish_reason"`
		ToolCalls *[]stepCall `json:"tool_calls"`
	}{&t.Finish, &t.ToolCalls})
	last := -1
	for _, c := range chat {
		if c.Role == "user" {
			last++
		}
	}
	t.UserTurn = &last
	return t
}
