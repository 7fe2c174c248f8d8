package export

import (
	"encoding/json"
	"testing"
)

// TestAppendIDs: the vector fast path and the byte-by-byte check agree
// with encoding/json on which arrays are lists of token ids.
func TestAppendIDs(t *testing.T) {
	for _, tc := range []struct{ in, out string }{
		{`[1,2,3]`, `1,2,3`}, {`[ 1 , 2 ]`, `1,2`}, {`[]`, ``}, {`[ ]`, ``}, {`[0]`, `0`},
		{`[1.5]`, "!"}, {`[-1]`, "!"}, {`[1e3]`, "!"}, {`["a"]`, "!"}, {`[[1]]`, "!"}, {`[true]`, "!"}, {`{}`, "!"}, {`[null]`, "!"},
	} {
		got, n, ok := appendIDs([]byte("x"), []byte(tc.in))
		if !ok {
			if tc.out != "!" {
				t.Errorf("%s: refused; want %s", tc.in, tc.out)
			}
			continue
		}
		var ids []int
		if err := json.Unmarshal([]byte(tc.in), &ids); err != nil || tc.out == "!" || string(got) != "x"+tc.out || n != len(ids) {
			t.Errorf("%s: %q, %d; want %q, %d ids", tc.in, got, n, tc.out, len(ids))
		}
	}
}

// TestSkipString: escaped quotes and backslashes before a quote.
func TestSkipString(t *testing.T) {
	for _, tc := range []struct {
		in  string
		end int
	}{{`"ab"x`, 4}, {`"a\"b"x`, 6}, {`"a\\"x`, 5}, {`"a\\\"b"x`, 8}, {`""`, 2}} {
		if end, err := skipString([]byte(tc.in), 0); err != nil || end != tc.end {
			t.Errorf("%s: %d, %v; want %d", tc.in, end, err, tc.end)
		}
	}
	if _, err := skipString([]byte(`"ab\"`), 0); err == nil {
		t.Errorf("an unterminated string was accepted")
	}
}
