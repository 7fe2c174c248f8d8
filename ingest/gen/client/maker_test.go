package client

import (
	"encoding/json"
	"testing"
)

// TestAnswerLineSaysItsMaker: an answer line carries the model and, for
// the simulator's answers only, "simulated": true.
func TestAnswerLineSaysItsMaker(t *testing.T) {
	for _, tc := range []struct {
		model     string
		simulated bool
	}{{"Kimi-K2.5", false}, {"sim-model", true}, {"", false}, {`a "quoted" model`, false}} {
		r := Result{API: APIGenerate, Model: tc.model, Simulated: tc.simulated}
		var got map[string]any
		if err := json.Unmarshal(r.AppendJSONL(nil, "x"), &got); err != nil {
			t.Fatal(err)
		}
		if m, ok := got["model"]; (tc.model != "") != ok || (ok && m != tc.model) {
			t.Errorf("%+v: model %v (present %v)", tc, m, ok)
		}
		if s, ok := got["simulated"]; tc.simulated != ok || (ok && s != true) {
			t.Errorf("%+v: simulated %v (present %v)", tc, s, ok)
		}
	}
}
