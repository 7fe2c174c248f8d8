package client

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// TestSetupErrors: a missing route (404, 405) and vLLM's or OpenAI's 404
// for an unknown model fail every request, so they are Setup errors, told
// apart by ModelNotFound; a 400 about one prompt stays Permanent.
func TestSetupErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		kind   Kind
		model  bool
	}{
		{"no /generate (vLLM, FastAPI)", 404, `{"detail":"Not Found"}`, Setup, false},
		{"wrong method", 405, `{"detail":"Method Not Allowed"}`, Setup, false},
		{"vllm unknown model", 404, "{\"object\":\"error\",\"message\":\"The model `m` does not exist.\",\"type\":\"NotFoundError\",\"param\":null,\"code\":404}", Setup, true},
		{"openai unknown model", 404, "{\"error\":{\"message\":\"The model `m` does not exist or you do not have access to it.\",\"type\":\"invalid_request_error\",\"code\":\"model_not_found\"}}", Setup, true},
		{"one prompt too long", 400, `{"error":{"message":"The input (9 tokens) is longer than the model's context length (8 tokens)."}}`, Permanent, false},
		{"bad sampling on one line", 400, `{"error":{"message":"top_p must be in (0, 1], got 0.0."}}`, Permanent, false},
	} {
		f := newFake(t, reply(tc.status, tc.body))
		_, err := f.client(Options{}).Generate(t.Context(), GenerateRequest{InputIDs: []int{1, 2}})
		e := asError(t, err)
		if e.Kind != tc.kind || e.ModelNotFound() != tc.model {
			t.Errorf("%s: kind %v, model %v; want %v, %v (%v)", tc.name, e.Kind, e.ModelNotFound(), tc.kind, tc.model, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:30000":                 "http://h:30000",
		"http://user:pw@h:30000":         "http://REDACTED@h:30000",
		"https://tok@h/v1":               "https://REDACTED@h/v1",
		"http://h:1/?api_key=sekret&x=1": "http://h:1/?REDACTED",
		"http://us er:pw@h%zz":           "(unprintable URL)",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q; want %q", in, got, want)
		}
	}
	// Errors name the server without its credentials.
	f := newFake(t, reply(http.StatusBadRequest, `{"error":{"message":"no"}}`))
	c := New(strings.Replace(f.URL, "http://", "http://user:pw@", 1), Options{})
	_, err := c.Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
	if err == nil || strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "user") || !strings.Contains(err.Error(), "REDACTED@") {
		t.Errorf("error %v", err)
	}
	if s := c.Server(); strings.Contains(s, "pw") {
		t.Errorf("Server() = %q", s)
	}
}

func TestTokenizeText(t *testing.T) {
	var body map[string]any
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		json.Unmarshal(b, &body)
		w.Write([]byte(`{"tokens":[1,15,27],"count":3,"max_model_len":4096}`))
	})
	ids, err := f.client(Options{}).TokenizeText(t.Context(), "a b")
	if err != nil || !reflect.DeepEqual(ids, []int{1, 15, 27}) {
		t.Fatalf("TokenizeText = %v, %v", ids, err)
	}
	if body["prompt"] != "a b" || body["add_special_tokens"] != true {
		t.Errorf("request body %v: want prompt and add_special_tokens true", body)
	}
	batch := newFake(t, reply(http.StatusOK, `{"tokens":[[1],[2]],"count":[1,1],"max_model_len":4096}`))
	if _, err := batch.client(Options{}).TokenizeText(t.Context(), "a"); err == nil {
		t.Error("a nested tokens list was taken for one prompt's ids")
	}
	old := newFake(t, reply(http.StatusNotFound, `{"detail":"Not Found"}`))
	_, err = old.client(Options{}).TokenizeText(t.Context(), "a")
	if e := asError(t, err); e.Kind != Permanent || !errors.Is(err, ErrTokenizeUnsupported) {
		t.Errorf("no /v1/tokenize: %v (%v)", err, e.Kind)
	}
}
