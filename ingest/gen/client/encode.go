package client

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// encodeBody encodes a request body exactly as encoding/json's Encoder
// with SetEscapeHTML(false) does, its trailing newline included. A
// /generate body, gen's every request, is laid out by hand (rid, the
// prompt's ids or text, stream), the Encoder writing only its sampling
// params and text: no reflection over a prompt's ids.
func encodeBody(in any) ([]byte, error) {
	g, ok := in.(*generateBody)
	if !ok {
		return encodeJSON(nil, in)
	}
	b := make([]byte, 0, 64+8*len(g.InputIDs))
	b = append(b, `{"rid":`...)
	b, err := encodeJSON(b, g.RID)
	if err != nil {
		return nil, err
	}
	b = b[:len(b)-1] // the Encoder's newline
	if len(g.InputIDs) > 0 {
		b = append(b, `,"input_ids":[`...)
		for i, id := range g.InputIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(id), 10)
		}
		b = append(b, ']')
	}
	if g.Text != nil {
		b = append(b, `,"text":`...)
		if b, err = encodeJSON(b, *g.Text); err != nil {
			return nil, err
		}
		b = b[:len(b)-1]
	}
	b = append(b, `,"sampling_params":`...)
	if b, err = encodeJSON(b, g.SamplingParams); err != nil {
		return nil, err
	}
	b = b[:len(b)-1]
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, g.Stream)
	return append(b, "}\n"...), nil
}

// encodeJSON appends v as the Encoder writes it (no HTML escaping, a
// newline after it).
func encodeJSON(b []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return buf.Bytes(), err
}
