package query_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/query/format"
)

// Lines of a dataset with multi-turn conversations, training records and
// exclusions, as gen and export write them.
func answerLine(id string) string {
	return fmt.Sprintf(`{"id":%q,"text":"a","prompt_tokens":4,"completion_tokens":5,"finish_reason":"stop"}`, id)
}

func turnLine(id string, turn, turns int) string {
	return fmt.Sprintf(`{"id":%q,"turn":%d,"turns":%d,"text":"t","prompt_tokens":4,"completion_tokens":3,"finish_reason":"stop"}`, id, turn, turns)
}

func excludedLine(id, reason, detail string) string {
	return fmt.Sprintf(`{"id":%q,"reason":%q,"detail":%q,"excluded_at":"2026-12-01T10:00:00Z"}`, id, reason, detail)
}

func tokenizedLine(id string) string {
	return fmt.Sprintf(`{"id":%q,"input_ids":[1,2,3],"loss_mask":[0,1,1]}`, id)
}

// putLines writes (replacing) one file of dir.
func putLines(t *testing.T, dir, file string, lines ...string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, file), strings.Join(lines, "\n")+"\n")
}

// addLines appends lines to one file of dir.
func addLines(t *testing.T, dir, file string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, file), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
}

// exportDataset writes dataset "ds" under a new root: prompts p1..p9, c1
// and c2; answers p1..p7; p8 failed for good; p9 unanswered; c1 a
// conversation with 2 of 3 turns answered; c2 a finished one. p1..p3 are
// tokenized, p4 and p5 excluded.
func exportDataset(t *testing.T) (root, dir string) {
	root = t.TempDir()
	dir = filepath.Join(root, "ds")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var prompts, raw []string
	for _, id := range []string{"c1", "c2", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"} {
		prompts = append(prompts, fmt.Sprintf(`{"id":%q,"text":"q"}`, id))
	}
	for i := 1; i <= 7; i++ {
		raw = append(raw, answerLine(fmt.Sprintf("p%d", i)))
	}
	raw = append(raw, `{"id":"c2","turns":[{},{}],"prompt_tokens":8,"completion_tokens":6,"finish_reason":"stop"}`)
	putLines(t, dir, "prompts.jsonl", prompts...)
	putLines(t, dir, "raw_responses.jsonl", raw...)
	putLines(t, dir, "turns.jsonl", turnLine("c1", 1, 3), turnLine("c2", 1, 2), turnLine("c1", 2, 3))
	putLines(t, dir, "errors.jsonl", `{"id":"p8","status":400,"error":"prompt too long"}`)
	putLines(t, dir, "tokenized.jsonl", tokenizedLine("p1"), tokenizedLine("p2"), tokenizedLine("p3"))
	putLines(t, dir, "excluded.jsonl", excludedLine("p4", "length", "raw_responses.jsonl:4: finish_reason length"), excludedLine("p5", "no_output_ids", ""))
	return root, dir
}

// checkIdentity asks progress for ds and checks its numbers, and that raw
// == tokenized + excluded + missing_tokenized; it checks that missing
// --stage tokenized lists missing_tokenized answers "not exported yet" and
// the excluded answers with their reasons.
func checkIdentity(t *testing.T, db query.Source, when string, raw, tokenized, excluded, missing int64) {
	t.Helper()
	r := answer(t, db, time.Now(), "progress", "ds")
	row := normRow(r.Rows[0])
	col := func(name string) int64 {
		for i, c := range r.Columns {
			if c == name {
				n, _ := row[i].(int64)
				return n
			}
		}
		t.Fatalf("progress has no column %q: %q", name, r.Columns)
		return 0
	}
	got := [4]int64{col("raw"), col("tokenized"), col("excluded"), col("missing_tokenized")}
	if got != [4]int64{raw, tokenized, excluded, missing} {
		t.Errorf("%s: raw, tokenized, excluded, missing_tokenized = %v; want %v", when, got, [4]int64{raw, tokenized, excluded, missing})
	}
	if got[0] != got[1]+got[2]+got[3] {
		t.Errorf("%s: raw %d != tokenized %d + excluded %d + missing_tokenized %d", when, got[0], got[1], got[2], got[3])
	}
	m := answer(t, db, time.Now(), "missing", "ds", "--stage", "tokenized")
	var notExported, excl int64
	for _, row := range m.Rows {
		reason, _ := row[3].(string)
		if reason == "not exported yet" {
			notExported++
		}
		if strings.HasPrefix(reason, "excluded: ") {
			excl++
		}
	}
	if notExported != missing || excl < excluded {
		t.Errorf("%s: missing --stage tokenized lists %d not exported and %d excluded; want %d and at least %d:\n%v", when, notExported, excl, missing, excluded, m.Rows)
	}
}

// TestProgressExcluded: raw == tokenized + excluded + missing_tokenized
// holds as records and exclusions come, in either order for one id, and
// as files are forgotten (a tokenized file replaced, a responses file
// truncated).
func TestProgressExcluded(t *testing.T) {
	root, dir := exportDataset(t)
	db, problems := ingesttest.Index(t, root)
	if len(problems) > 0 {
		t.Fatalf("indexing: %v", problems)
	}
	// raw: p1..p7 and c2; c1 is half done and not counted.
	checkIdentity(t, db, "first export", 8, 3, 2, 3)

	// p3, tokenized, is excluded later; p5, excluded, is tokenized later.
	addLines(t, dir, "excluded.jsonl", excludedLine("p3", "max_len", "40000 tokens > --max-len 32768"))
	addLines(t, dir, "tokenized.jsonl", tokenizedLine("p5"))
	ingesttest.IndexInto(t, db, root)
	checkIdentity(t, db, "p3 excluded after its record, p5 tokenized after its exclusion", 8, 4, 1, 3)

	// An exclusion of an id without an answer changes no column.
	addLines(t, dir, "excluded.jsonl", excludedLine("p9", "bad_answer", ""))
	ingesttest.IndexInto(t, db, root)
	checkIdentity(t, db, "p9 excluded without an answer", 8, 4, 1, 3)

	// The tokenized file replaced by a shorter one: forgotten, read again.
	putLines(t, dir, "tokenized.jsonl", tokenizedLine("p1"))
	ingesttest.IndexInto(t, db, root)
	checkIdentity(t, db, "tokenized.jsonl replaced", 8, 1, 3, 4) // excluded p3, p4, p5

	// The responses file truncated to p1..p3: their exclusions stay, only
	// p3's counts.
	putLines(t, dir, "raw_responses.jsonl", answerLine("p1"), answerLine("p2"), answerLine("p3"))
	ingesttest.IndexInto(t, db, root)
	checkIdentity(t, db, "raw_responses.jsonl truncated", 3, 1, 1, 1)
}

// TestMissingTokenizedReasons: missing --stage tokenized lists every
// prompt or answer without a training record, in id order, with why; as
// TSV it is the dataset, stage, id and reason of each.
func TestMissingTokenizedReasons(t *testing.T) {
	root, _ := exportDataset(t)
	db, _ := ingesttest.Index(t, root)
	var out bytes.Buffer
	r := answer(t, db, time.Now(), "missing", "ds", "--stage", "tokenized")
	if err := format.Write(&out, r, format.Options{Format: query.TSV}); err != nil {
		t.Fatal(err)
	}
	want := "dataset\tstage\tid\treason\n" +
		"ds\ttokenized\tc1\tconversation half done (2 turns answered)\n" +
		"ds\ttokenized\tc2\tnot exported yet\n" +
		"ds\ttokenized\tp4\texcluded: length: raw_responses.jsonl:4: finish_reason length\n" +
		"ds\ttokenized\tp5\texcluded: no_output_ids\n" +
		"ds\ttokenized\tp6\tnot exported yet\n" +
		"ds\ttokenized\tp7\tnot exported yet\n" +
		"ds\ttokenized\tp8\tfailed: http 400: prompt too long\n" +
		"ds\ttokenized\tp9\tno answer yet\n"
	if out.String() != want {
		t.Errorf("missing ds --stage tokenized:\n%s\nwant:\n%s", out.String(), want)
	}
	// JSON keys are the columns.
	out.Reset()
	if err := format.Write(&out, r, format.Options{Format: query.JSON}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `{"dataset": "ds", "stage": "tokenized", "id": "p9", "reason": "no answer yet"}`) {
		t.Errorf("missing as JSON:\n%s", out.String())
	}
	// Headerless TSV is bare ids, for xargs, as for --stage raw.
	q, err := query.Parse([]string{"missing", "ds", "--stage", "tokenized", "--no-header"})
	if err != nil {
		t.Fatal(err)
	}
	q.Resolve(false)
	out.Reset()
	var c query.Collect
	if err := query.Run(db, q, time.Now(), &c); err != nil {
		t.Fatal(err)
	}
	if err := format.Write(&out, &c.Result, format.Options{Format: query.TSV, NoHeader: true}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "c1\nc2\np4\np5\np6\np7\np8\np9\n" {
		t.Errorf("bare missing --stage tokenized = %q", out.String())
	}
	// One turn answered is said in the singular.
	dir := filepath.Join(root, "ds")
	addLines(t, dir, "prompts.jsonl", `{"id":"c3","text":"q"}`)
	addLines(t, dir, "turns.jsonl", turnLine("c3", 1, 2))
	ingesttest.IndexInto(t, db, root)
	r = answer(t, db, time.Now(), "missing", "ds", "--stage", "tokenized")
	if got := normRow(r.Rows[2]); got[2] != "c3" || got[3] != "conversation half done (1 turn answered)" {
		t.Errorf("c3: %v", got)
	}
}

// TestNewStagesShown: the turns and excluded stages appear in files,
// datasets and show, with a turn's id ID#TURN.
func TestNewStagesShown(t *testing.T) {
	root, dir := exportDataset(t)
	db, _ := ingesttest.Index(t, root)
	files := answer(t, db, time.Now(), "files", "ds")
	stages := map[string]int64{}
	for _, row := range files.Rows {
		stages[row[1].(string)] = norm(row[4]).(int64)
	}
	if stages["turns"] != 3 || stages["excluded"] != 2 {
		t.Errorf("files: records by stage %v; want turns.jsonl with 3 (c1 half done) and excluded.jsonl with 2", stages)
	}
	sets := answer(t, db, time.Now(), "datasets")
	checkRows(t, "datasets", sets, []string{"dataset", "files", "prompts", "raw", "tokenized", "errors", "turns", "excluded"},
		[][]any{{"ds", int64(6), int64(11), int64(8), int64(3), int64(1), int64(3), int64(2)}})

	read := func(file string, n int) string {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(string(data), "\n")[n-1]
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "ds", "p4", "--stage", "excluded"}, read("excluded.jsonl", 1)},
		{[]string{"show", "ds", "c1#2", "--stage", "turns"}, read("turns.jsonl", 3)},
		{[]string{"show", "ds", "c1#1"}, read("turns.jsonl", 1)}, // found without --stage
		{[]string{"show", "ds", "p4"}, read("raw_responses.jsonl", 4)},
	} {
		if r := answer(t, db, time.Now(), tc.args...); string(r.Line) != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.args, r.Line, tc.want)
		}
	}
	if err := answerErr(t, db, "show", "ds", "p6", "--stage", "excluded"); !strings.Contains(err.Error(), `no excluded record with id "p6"`) {
		t.Errorf("show of an id not excluded: %v", err)
	}
	if err := answerErr(t, db, "show", "ds", "c1", "--stage", "turns"); !strings.Contains(err.Error(), "c1#1") {
		t.Errorf("show --stage turns of a conversation id: %v; want the ID#TURN form named", err)
	}
	// A table shows excluded once it is not 0 (it hides it while it is).
	var out bytes.Buffer
	if err := format.Write(&out, answer(t, db, time.Now(), "progress"), format.Options{Format: query.Table}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "excluded") {
		t.Errorf("progress table lacks excluded:\n%s", out.String())
	}
}
