package sglang

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// GenerateStream is Generate with "stream": true: it reads SGLang's
// server-sent events (data: <json>, ending with data: [DONE]) to the end and
// returns the assembled Result. It copes with every streaming mode:
// cumulative chunks (the default), incremental chunks
// (--incremental-streaming-output), and the older --stream-output mode with
// incremental output_ids but cumulative text. An error event after the 200
// header (data: {"error": ...}) becomes an *Error with Status 200; it is
// Permanent when the server marks it non-retryable or gives a 4xx code, and
// Transient otherwise. A stream that ends before its final chunk is
// Transient.
func (c *Client) GenerateStream(ctx context.Context, req GenerateRequest) (*Result, error) {
	const op = "POST /generate"
	body, err := c.generateBody(op, req, true)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := c.send(ctx, http.MethodPost, "/generate", body, "text/event-stream")
	if err != nil {
		return nil, err
	}
	defer drainClose(resp.Body)
	var acc streamAccumulator
	if err := c.readStream(ctx, op, resp.Body, &acc); err != nil {
		return nil, err
	}
	final := acc.result()
	if final.MetaInfo.FinishReason == nil {
		return nil, &Error{Kind: Transient, Status: http.StatusOK, Server: c.server(), Op: op,
			Message: "stream ended without a final chunk"}
	}
	return c.generateResult(op, body.RID, final, start, time.Now())
}

// readStream feeds every data event of an SSE body to acc until [DONE].
func (c *Client) readStream(ctx context.Context, op string, body io.Reader, acc *streamAccumulator) error {
	br := bufio.NewReaderSize(body, 64<<10)
	for {
		line, readErr := br.ReadBytes('\n')
		if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:")); ok {
			data = bytes.TrimSpace(data)
			if string(data) == "[DONE]" {
				return nil
			}
			var ch generateResponse
			if err := json.Unmarshal(data, &ch); err != nil {
				return &Error{Kind: Permanent, Status: http.StatusOK, Server: c.server(), Op: op,
					Message: "invalid stream event: " + err.Error(), Err: err}
			}
			if len(ch.Error) > 0 && string(ch.Error) != "null" {
				return c.streamError(op, ch.Error)
			}
			acc.add(&ch)
		}
		if readErr == io.EOF {
			if acc.finished() {
				return nil // final chunk seen; [DONE] lost
			}
			return &Error{Kind: Transient, Status: http.StatusOK, Server: c.server(), Op: op,
				Message: "stream ended before [DONE]"}
		}
		if readErr != nil {
			return c.decodeError(ctx, op, http.StatusOK, readErr)
		}
	}
}

// streamError builds the Error for a data: {"error": ...} event.
func (c *Client) streamError(op string, raw json.RawMessage) *Error {
	var v struct {
		Message   string `json:"message"`
		Code      any    `json:"code"`
		Retryable *bool  `json:"retryable"`
	}
	e := &Error{Kind: Transient, Status: http.StatusOK, Server: c.server(), Op: op}
	if raw[0] != '{' || json.Unmarshal(raw, &v) != nil {
		e.Message = "stream error: " + c.redact(jsonMessage(raw))
		return e
	}
	code := 0
	if f, ok := v.Code.(float64); ok {
		code = int(f)
	}
	switch {
	case v.Retryable != nil && !*v.Retryable:
		e.Kind = Permanent
	case v.Retryable != nil && *v.Retryable:
	case code != 0:
		if e.Kind = kindForStatus(code); e.Kind == Auth {
			e.Kind = Permanent
		}
	}
	e.Message = "stream error"
	if code != 0 {
		e.Message = fmt.Sprintf("stream error (code %d)", code)
	}
	if v.Message != "" {
		e.Message += ": " + c.redact(truncate(v.Message))
	}
	return e
}

// Streaming modes of output_ids, as far as the chunks have shown.
const (
	modeUnknown = iota
	modeCumulative
	modeIncremental
)

// streamAccumulator assembles /generate stream chunks. completion_tokens is
// cumulative in every mode, so a chunk whose output_ids are as long as
// completion_tokens (and not as long as the growth since the last chunk) is
// cumulative. Text is taken as cumulative when output_ids are, and
// otherwise when every chunk's text extends the previous one (the older
// --stream-output mode); else the deltas are concatenated.
type streamAccumulator struct {
	ids      []int
	idsMode  int
	prevCT   *int
	hasIDs   bool
	hasText  bool
	lastText string          // the newest chunk's text
	allText  strings.Builder // every chunk's text, concatenated
	textCum  bool            // every chunk's text extended the previous one
	chunks   int
	meta     metaInfo
}

func (a *streamAccumulator) add(ch *generateResponse) {
	a.chunks++
	if ch.OutputIDs != nil {
		a.addIDs(ch.OutputIDs, ch.MetaInfo.CompletionTokens)
	}
	if ch.Text != nil {
		t := *ch.Text
		if !a.hasText {
			a.textCum = true
		} else if a.textCum && !strings.HasPrefix(t, a.lastText) {
			a.textCum = false
		}
		a.hasText = true
		a.lastText = t
		a.allText.WriteString(t)
	}
	if ch.MetaInfo.CompletionTokens != nil {
		a.prevCT = ch.MetaInfo.CompletionTokens
	}
	a.meta = ch.MetaInfo
}

func (a *streamAccumulator) addIDs(ids []int, ct *int) {
	if !a.hasIDs {
		a.hasIDs = true
		a.ids = ids
		return
	}
	if a.idsMode == modeUnknown {
		n := len(ids)
		switch {
		case ct != nil && a.prevCT != nil:
			grew := *ct - *a.prevCT
			if n == *ct && n != grew {
				a.idsMode = modeCumulative
			} else if n == grew && n != *ct {
				a.idsMode = modeIncremental
			}
		case n >= len(a.ids) && len(a.ids) > 0 && slices.Equal(ids[:len(a.ids)], a.ids):
			a.idsMode = modeCumulative
		case len(a.ids) > 0:
			a.idsMode = modeIncremental
		}
	}
	if a.idsMode == modeCumulative || len(a.ids) == 0 {
		a.ids = ids
		return
	}
	a.ids = append(a.ids, ids...)
}

// finished reports whether the final chunk (with a finish_reason) arrived.
func (a *streamAccumulator) finished() bool { return a.meta.FinishReason != nil }

// result returns the assembled answer.
func (a *streamAccumulator) result() *generateResponse {
	r := &generateResponse{MetaInfo: a.meta}
	if a.hasIDs {
		r.OutputIDs = a.ids
		if r.OutputIDs == nil {
			r.OutputIDs = []int{}
		}
	}
	if a.hasText {
		t := a.allText.String()
		if a.idsMode == modeCumulative || (a.textCum && a.chunks > 1) {
			t = a.lastText
		}
		r.Text = &t
	}
	return r
}
