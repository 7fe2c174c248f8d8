package sim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// testServer starts s on an httptest server and returns its base URL.
func testServer(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	s := New(cfg)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return s, ts.URL
}

// do sends a request with a JSON body (if body is not "") and returns the
// response and its body.
func do(t *testing.T, method, url, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return resp, b
}

// post sends a JSON POST.
func post(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	return do(t, http.MethodPost, url, "application/json", body)
}

// postOK sends a JSON POST, requires 200 and decodes the body.
func postOK(t *testing.T, url, body string) any {
	t.Helper()
	resp, b := post(t, url, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s %s: status %d: %s", url, body, resp.StatusCode, b)
	}
	return decode(t, b)
}

// decode decodes JSON, keeping numbers as json.Number.
func decode(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	return v
}

// obj asserts v is a JSON object.
func obj(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("not an object: %#v", v)
	}
	return m
}

// arr asserts v is a JSON array.
func arr(t *testing.T, v any) []any {
	t.Helper()
	a, ok := v.([]any)
	if !ok {
		t.Fatalf("not an array: %#v", v)
	}
	return a
}

// num asserts v is a JSON integer.
func num(t *testing.T, v any) int {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("not a number: %#v", v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("not an integer: %v", n)
	}
	return int(i)
}

// ints converts a JSON array of integers.
func ints(t *testing.T, v any) []int {
	t.Helper()
	a := arr(t, v)
	out := make([]int, len(a))
	for i, e := range a {
		out[i] = num(t, e)
	}
	return out
}

// str asserts v is a JSON string.
func str(t *testing.T, v any) string {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("not a string: %#v", v)
	}
	return s
}

// keys returns the keys of the top-level JSON object in b in document
// order, or of the object at the given path of object keys.
func keys(t *testing.T, b []byte, path ...string) []string {
	t.Helper()
	raw := json.RawMessage(b)
	for _, p := range path {
		m, ok := asObject(raw)
		if !ok {
			t.Fatalf("no object at %v in %s", path, b)
		}
		raw = m[p]
	}
	return orderedKeys(raw)
}

// wantKeys checks the ordered keys of the object at path.
func wantKeys(t *testing.T, b []byte, want []string, path ...string) {
	t.Helper()
	if got := keys(t, b, path...); !reflect.DeepEqual(got, want) {
		t.Errorf("keys at %v:\n got %v\nwant %v", path, got, want)
	}
}

// errMessage returns the message of an error body of either shape.
func errMessage(t *testing.T, b []byte) string {
	t.Helper()
	m := obj(t, decode(t, b))
	if e, ok := m["error"].(map[string]any); ok {
		return str(t, e["message"])
	}
	return str(t, m["message"])
}
