package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gendex/store"
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

// TestGetFieldsAfterEscapes: a value with escaped quotes and backslashes
// before its closing quote does not hide the fields after it.
func TestGetFieldsAfterEscapes(t *testing.T) {
	vals := make([][]byte, 2)
	for _, line := range []string{`{"a":"x\"y","b":1,"c":2}`, `{"a":"x\\","b":1,"c":2}`, `{"a":"\\\"","b":1,"c":2}`, `{"a\u0062":0,"b":1,"c":2}`} {
		if err := getFields([]byte(line), []string{"b", "c"}, vals); err != nil || string(vals[0]) != "1" || string(vals[1]) != "2" {
			t.Errorf("%s: b %s, c %s, %v; want 1 and 2", line, vals[0], vals[1], err)
		}
	}
	if err := getFields([]byte(`{"a":"ab\"}`), []string{"a"}, vals); err == nil {
		t.Errorf("an unterminated string was accepted")
	}
}

// TestDigitsAndCommas: the eight-bytes-at-a-time check agrees with a byte
// by byte one on every byte value at every position of a word, and on
// random strings of digits, commas and a few other bytes.
func TestDigitsAndCommas(t *testing.T) {
	ref := func(b []byte) (int, bool) {
		n := 0
		for _, c := range b {
			switch {
			case c == ',':
				n++
			case c < '0' || c > '9':
				return 0, false
			}
		}
		return n, true
	}
	check := func(b []byte) {
		t.Helper()
		n, ok := digitsAndCommas(b)
		wn, wok := ref(b)
		if ok != wok || (ok && n != wn) {
			t.Fatalf("%q: %d, %v; want %d, %v", b, n, ok, wn, wok)
		}
	}
	base := []byte("12,345,6789,0,12,3,45678,9")
	for pos := range base {
		for c := range 256 {
			b := append([]byte(nil), base...)
			b[pos] = byte(c)
			check(b)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("0123456789,,,,0123456789 -.e\"\x80\xff/:+")
	for range 20000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			if rng.IntN(50) == 0 {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[i] = alphabet[rng.IntN(14)]
			}
		}
		check(b)
	}
}

// FuzzAppendIDs: appendIDs accepts exactly the JSON arrays of
// non-negative integers that encoding/json reads as such (written with no
// sign, fraction or exponent), and copies their digits.
func FuzzAppendIDs(f *testing.F) {
	for _, s := range []string{`[1,2,3]`, `[ 1 , 2 ]`, `[]`, `[0]`, `[1.5]`, `[-1]`, `[1e3]`, `[01]`, `[1,,2]`, `[,1]`, `[1,]`,
		`[12345678,9]`, `[1,2,3,4,5,6,7,8,9,10,11,12,13]`, `[null]`, `["1"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if !json.Valid(v) {
			return // every array appendIDs meets is from a valid line
		}
		got, n, ok := appendIDs(nil, v)
		var raw []json.RawMessage
		want := json.Unmarshal(v, &raw) == nil && bytes.HasPrefix(bytes.TrimSpace(v), []byte("["))
		var digits []string
		for _, r := range raw {
			s := string(bytes.TrimSpace(r))
			if s == "" || strings.Trim(s, "0123456789") != "" || (len(s) > 1 && s[0] == '0') {
				want = false
				break
			}
			digits = append(digits, s)
		}
		if ok != want {
			t.Fatalf("%q: ok %v; want %v", v, ok, want)
		}
		if ok && (string(got) != strings.Join(digits, ",") || n != len(digits)) {
			t.Fatalf("%q: %q, %d; want %q, %d", v, got, n, strings.Join(digits, ","), len(digits))
		}
	})
}

// TestSortByPlace: entries end in file and offset order, each once.
func TestSortByPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var keys []placeKey
	for n := range 300 {
		es := make([]entry, n)
		offsets := rng.Perm(n) // a file's offsets are distinct
		for i := range es {
			es[i].rec.File = uint32(rng.IntN(3))
			es[i].rec.Offset = int64(offsets[i])
			es[i].id = fmt.Sprint(es[i].rec.File, "/", es[i].rec.Offset)
		}
		want := slices.Clone(es)
		slices.SortFunc(want, func(a, b entry) int {
			if a.rec.File != b.rec.File {
				return int(a.rec.File) - int(b.rec.File)
			}
			return int(a.rec.Offset - b.rec.Offset)
		})
		keys = sortByPlace(es, keys)
		for i := range es {
			if es[i].id != want[i].id || es[i].rec != want[i].rec {
				t.Fatalf("n %d: entry %d is %s; want %s", n, i, es[i].id, want[i].id)
			}
		}
	}
}

// TestSpillRoundTrip: entries come back from the todo list's file as they
// went in, ids of any length, with and without a prompt.
func TestSpillRoundTrip(t *testing.T) {
	sp, err := newSpill()
	if err != nil {
		t.Fatal(err)
	}
	defer sp.close()
	rng := rand.New(rand.NewPCG(7, 8))
	var want []entry
	for i := range 3000 {
		e := entry{id: strings.Repeat("x", rng.IntN(300)) + fmt.Sprint(i)}
		e.rec = store.Record{File: uint32(rng.IntN(5)), Offset: rng.Int64N(1 << 45), Length: rng.Int64N(1 << 20), Line: rng.Int64N(1 << 30),
			Sum: rng.Uint32(), PromptTokens: rng.Int64N(1<<20) - 1, CompletionTokens: rng.Int64N(1<<20) - 1,
			Finish: []string{"", "stop", "length", "abort", "tool_calls", strings.Repeat("f", 200)}[rng.IntN(6)]}
		if rng.IntN(3) > 0 {
			e.hasPrompt = true
			e.prompt = store.Record{File: uint32(rng.IntN(5)), Offset: rng.Int64N(1 << 45), Length: rng.Int64N(1 << 20), Line: rng.Int64N(1 << 30), Sum: rng.Uint32()}
		}
		if err := sp.add(&e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	if err := sp.rewind(); err != nil {
		t.Fatal(err)
	}
	var got []entry
	buf := make([]entry, 7)
	for {
		n, err := sp.next(buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		got = append(got, buf[:n]...)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%d entries back, %d in; first differences elided", len(got), len(want))
	}
}

// TestHelperDecidesAsOne: a chunk decided in two halves, the second by the
// helper goroutine, gives the records, exclusions and counts that chunks
// of one answer (no helper) give, in both formats, whatever the chunk
// and flush sizes.
func TestHelperDecidesAsOne(t *testing.T) {
	var p, r strings.Builder
	id := regexp.MustCompile(`^\{"id":"([^"]*)"`)
	for k := range 25 {
		for _, f := range []struct {
			b     *strings.Builder
			lines string
		}{{&p, fixturePrompts}, {&r, fixtureRaw}} {
			for _, line := range strings.SplitAfter(f.lines, "\n") {
				f.b.WriteString(id.ReplaceAllString(line, fmt.Sprintf(`{"id":"${1}-%d"`, k)))
			}
		}
	}
	sorted := func(s string) string {
		lines := strings.SplitAfter(s, "\n")
		sort.Strings(lines)
		return strings.Join(lines, "")
	}
	for _, format := range []Format{IDs, Conversations} {
		d, _ := fixture(t, p.String(), r.String())
		export := func(chunk, flush int) (Result, string, string) {
			db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			d := d
			d.Out = t.TempDir()
			res, tok, exc := runExport(t, db, d, Config{Format: format, ChunkSize: chunk, FlushBytes: flush})
			// The first few bad prompts are in the order decided, with
			// the fixture's folder: their number is compared.
			res.BadPrompts = res.BadPrompts[:0:len(res.BadPrompts)]
			return res, sorted(tok), sorted(exc)
		}
		wantRes, wantTok, wantExc := export(1, 1<<20)
		if wantRes.Records == 0 || len(wantRes.Excluded) == 0 || wantRes.Left == [numLeft]int{} {
			t.Fatalf("the fixture should give records, exclusions and answers left: %+v", wantRes)
		}
		for _, c := range []struct{ chunk, flush int }{{2, 1 << 20}, {3, 100}, {8, 700}, {101, 1 << 20}, {10000, 2000}} {
			res, tok, exc := export(c.chunk, c.flush)
			if !reflect.DeepEqual(res, wantRes) {
				t.Errorf("format %d, chunks of %d, flush %d: %+v; want %+v", format, c.chunk, c.flush, res, wantRes)
			}
			same(t, fmt.Sprintf("format %d, chunks of %d, flush %d: sorted records", format, c.chunk, c.flush), tok, wantTok)
			same(t, fmt.Sprintf("format %d, chunks of %d, flush %d: sorted exclusions", format, c.chunk, c.flush), exc, wantExc)
		}
	}
}

// TestLineReaderAnyOrder: lines read forwards, backwards and in random
// order, through a reader of either kind, are the lines at their records.
func TestLineReaderAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	path := filepath.Join(t.TempDir(), "f.jsonl")
	var data []byte
	var recs []store.Record
	for i := range 3000 {
		line := bytes.Repeat([]byte{byte('a' + i%26)}, 1+rng.IntN(3000))
		if i%500 == 0 {
			line = bytes.Repeat([]byte{'L'}, window+rng.IntN(window)) // longer than a window
		}
		recs = append(recs, store.Record{Offset: int64(len(data)), Length: int64(len(line)), Line: int64(i + 1), Sum: store.LineSum(line)})
		data = append(append(data, line...), '\n')
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	orders := map[string][]int{"forwards": make([]int, len(recs)), "backwards": make([]int, len(recs)), "random": rng.Perm(len(recs))}
	for i := range recs {
		orders["forwards"][i], orders["backwards"][i] = i, len(recs)-1-i
	}
	for name, order := range orders {
		for _, back := range []bool{false, true} {
			r, err := openReader(path)
			if err != nil {
				t.Fatal(err)
			}
			r.back = back
			for _, i := range order {
				line, err := r.line(&recs[i])
				if err != nil || !bytes.Equal(line, data[recs[i].Offset:recs[i].Offset+recs[i].Length]) {
					t.Fatalf("%s, back %v: line %d: %v", name, back, i+1, err)
				}
			}
			r.close()
		}
	}
}
