package query_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"gendex/query"
	"gendex/store"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want query.Query
	}{
		{"progress all", []string{"progress"},
			query.Query{Question: "progress"}},
		{"progress some", []string{"progress", "a", "b"},
			query.Query{Question: "progress", Datasets: []string{"a", "b"}}},
		{"tokens", []string{"tokens", "a"},
			query.Query{Question: "tokens", Datasets: []string{"a"}}},
		{"finish", []string{"finish"},
			query.Query{Question: "finish"}},
		{"errors", []string{"errors", "a"},
			query.Query{Question: "errors", Datasets: []string{"a"}}},
		{"datasets", []string{"datasets"},
			query.Query{Question: "datasets"}},
		{"throughput default window is 30s", []string{"throughput"},
			query.Query{Question: "throughput", Window: 30 * time.Second}},
		{"throughput flag before positional", []string{"throughput", "--window", "5m", "B1"},
			query.Query{Question: "throughput", Window: 5 * time.Minute, Datasets: []string{"B1"}}},
		{"throughput flag after positional", []string{"throughput", "B1", "B2", "--window=1h"},
			query.Query{Question: "throughput", Window: time.Hour, Datasets: []string{"B1", "B2"}}},
		{"throughput flag between positionals", []string{"throughput", "B1", "-window", "90s", "B2"},
			query.Query{Question: "throughput", Window: 90 * time.Second, Datasets: []string{"B1", "B2"}}},
		{"throughput window of exactly one second", []string{"throughput", "--window", "1s"},
			query.Query{Question: "throughput", Window: time.Second}},
		{"throughput window is truncated to whole seconds", []string{"throughput", "--window", "2.7s"},
			query.Query{Question: "throughput", Window: 2 * time.Second}},
		{"missing defaults to raw", []string{"missing", "a"},
			query.Query{Question: "missing", Datasets: []string{"a"}, Stage: store.Raw}},
		{"missing tokenized, flag first", []string{"missing", "--stage", "tokenized", "a"},
			query.Query{Question: "missing", Datasets: []string{"a"}, Stage: store.Tokenized, StageSet: true}},
		{"missing raw, flag last", []string{"missing", "a", "--stage=raw"},
			query.Query{Question: "missing", Datasets: []string{"a"}, Stage: store.Raw, StageSet: true}},
		{"show", []string{"show", "a", "id-1"},
			query.Query{Question: "show", Datasets: []string{"a"}, ID: "id-1"}},
		{"show with stage after", []string{"show", "a", "id-1", "--stage", "prompts"},
			query.Query{Question: "show", Datasets: []string{"a"}, ID: "id-1", Stage: store.Prompts, StageSet: true}},
		{"show with stage between", []string{"show", "a", "--stage", "errors", "id-1"},
			query.Query{Question: "show", Datasets: []string{"a"}, ID: "id-1", Stage: store.Errors, StageSet: true}},
		{"show with an id that looks like a flag after --", []string{"show", "a", "--", "-17"},
			query.Query{Question: "show", Datasets: []string{"a"}, ID: "-17"}},
		{"format and no-header before", []string{"progress", "--format", "csv", "--no-header", "a"},
			query.Query{Question: "progress", Datasets: []string{"a"}, Format: query.CSV, NoHeader: true}},
		{"format after", []string{"progress", "a", "--format=json"},
			query.Query{Question: "progress", Datasets: []string{"a"}, Format: query.JSON}},
		{"format table", []string{"tokens", "-format", "table"},
			query.Query{Question: "tokens", Format: query.Table}},
		{"format tsv", []string{"tokens", "--format", "tsv"},
			query.Query{Question: "tokens", Format: query.TSV}},
		{"format auto", []string{"tokens", "--format", "auto"},
			query.Query{Question: "tokens", Format: query.Auto}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := query.Parse(tc.args)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.args, err)
			}
			if len(got.Datasets) == 0 {
				got.Datasets = nil
			}
			if !reflect.DeepEqual(got.Args, tc.args) {
				t.Errorf("Args = %q; want the words parsed, %q", got.Args, tc.args)
			}
			got.Args = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q)\n got %+v\nwant %+v", tc.args, got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		msg  string // a substring the message must hold, so the user knows what to fix
	}{
		{"nothing", nil, "progress"},
		{"unknown question", []string{"progres"}, "progres"},
		{"unknown question lists the questions", []string{"status"}, "throughput"},
		{"unknown flag", []string{"progress", "--bogus"}, "bogus"},
		{"flag without value", []string{"throughput", "--window"}, "window"},
		{"bad format", []string{"progress", "--format", "xml"}, "xml"},
		{"window below a second", []string{"throughput", "--window", "500ms"}, "500ms"},
		{"window zero", []string{"throughput", "--window", "0s"}, "0s"},
		{"window negative", []string{"throughput", "--window", "-5s"}, "-5s"},
		{"window garbage", []string{"throughput", "--window", "soon"}, "soon"},
		{"window without unit", []string{"throughput", "--window", "30"}, "30"},
		{"missing without dataset", []string{"missing"}, "missing DATASET"},
		{"missing with two datasets", []string{"missing", "a", "b"}, "missing DATASET"},
		{"missing stage prompts", []string{"missing", "a", "--stage", "prompts"}, "raw or tokenized"},
		{"missing stage errors", []string{"missing", "a", "--stage", "errors"}, "raw or tokenized"},
		{"missing stage unknown", []string{"missing", "a", "--stage", "done"}, "done"},
		{"show without id", []string{"show", "a"}, "show DATASET ID"},
		{"show without anything", []string{"show"}, "show DATASET ID"},
		{"show with three positionals", []string{"show", "a", "b", "c"}, "show DATASET ID"},
		{"show bad stage", []string{"show", "a", "b", "--stage", "cooked"}, "cooked"},
		{"datasets takes no arguments", []string{"datasets", "a"}, "datasets"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := query.Parse(tc.args)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", tc.args, q)
			}
			if !errors.Is(err, query.ErrUsage) {
				t.Errorf("Parse(%q) error %q does not wrap ErrUsage", tc.args, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Parse(%q) error %q does not mention %q", tc.args, err, tc.msg)
			}
		})
	}
}

// Ids are kept as written, so numeric ids can be negative ("-1"); after "--"
// nothing may be read as a flag, wherever the "--" stands.
func TestParseDoubleDashEndsFlags(t *testing.T) {
	got, err := query.Parse([]string{"show", "--", "a", "-1"})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got.Datasets[0] != "a" || got.ID != "-1" {
		t.Errorf("got dataset %q id %q, want a and -1", got.Datasets, got.ID)
	}
	got, err = query.Parse([]string{"progress", "--", "a", "--format", "json"})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if want := []string{"a", "--format", "json"}; !reflect.DeepEqual(got.Datasets, want) || got.Format != query.Auto {
		t.Errorf("got datasets %q format %v, want %q and auto", got.Datasets, got.Format, want)
	}
}

func TestQuestionsAreAllParsable(t *testing.T) {
	// Every listed question must be accepted by Parse in its simplest form.
	for _, q := range query.Questions {
		args := []string{q.Name}
		switch q.Name {
		case "missing", "list":
			args = append(args, "a")
		case "show":
			args = append(args, "a", "id")
		}
		if _, err := query.Parse(args); err != nil {
			t.Errorf("Parse(%q): %v", args, err)
		}
	}
	if got := query.Names(); len(got) != len(query.Questions) {
		t.Errorf("Names() = %q, want %d names", got, len(query.Questions))
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]query.Format{"": query.Auto, "auto": query.Auto, "table": query.Table, "tsv": query.TSV, "csv": query.CSV, "json": query.JSON} {
		got, err := query.ParseFormat(in)
		if err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v", in, got, err, want)
		}
		if in != "" && got.String() != in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), in)
		}
	}
	for _, in := range []string{"JSON", "yaml", "tsv "} {
		if _, err := query.ParseFormat(in); err == nil {
			t.Errorf("ParseFormat(%q): no error", in)
		}
	}
}
