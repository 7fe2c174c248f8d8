package gen

import (
	"strings"
	"testing"
)

// TestIdentityChange: the comparison of a server read again with its
// first reading in the run: another model is a change, named before and
// after; another max_new_tokens is not, and neither is a key the server
// no longer tells (its identity read failed: unknown, not another).
func TestIdentityChange(t *testing.T) {
	first := `{"sampling":{"max_new_tokens":20},"unset":"server defaults","server":{"model":"model-one","version":"0.5"}}`
	for _, c := range []struct{ now, want string }{
		{first, ""},
		{`{"sampling":{"max_new_tokens":99},"unset":"server defaults","server":{"model":"model-one","version":"0.5"}}`, ""},
		{`{"sampling":{"max_new_tokens":20},"unset":"server defaults","server":{"model":"model-one"}}`, ""},
		{`{"sampling":{"max_new_tokens":20},"unset":"server defaults","server":{"model":"model-two","version":"0.5"}}`, `server.model: "model-one" before, "model-two" now`},
		{`{"sampling":{"max_new_tokens":20},"unset":"server defaults","server":{"model":"model-one","version":"0.5","chat_template":"x"}}`, `server.chat_template: unset`},
	} {
		got := identityChange([]byte(first), []byte(c.now))
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("identityChange(%s) = %q; want %q", c.now, got, c.want)
		}
	}
}
