package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/query/web"
)

// TestAcceptView: a dataset whose answers carry spec_verify_ct has an
// accept tab listing them worst accept length first (query list --sort
// accept), the answers without one counted; a dataset without any shows
// no such tab.
func TestAcceptView(t *testing.T) {
	root := t.TempDir()
	// completion tokens / verify steps: d 1.50, a 2.00, c 3.00, e 4.00; b has none.
	writeFile(t, filepath.Join(root, "s", "raw_responses.jsonl"), strings.Join([]string{
		`{"id":"a","text":"x","completion_tokens":20,"spec_verify_ct":10,"finish_reason":"stop"}`,
		`{"id":"b","text":"x","completion_tokens":20,"finish_reason":"stop"}`,
		`{"id":"c","text":"x","completion_tokens":30,"spec_verify_ct":10,"finish_reason":"stop"}`,
		`{"id":"d","text":"x","completion_tokens":15,"spec_verify_ct":10,"finish_reason":"length"}`,
		`{"id":"e","text":"x","completion_tokens":40,"spec_verify_ct":10,"finish_reason":"stop"}`,
	}, "\n")+"\n")
	writeFile(t, filepath.Join(root, "n", "raw_responses.jsonl"), `{"id":"a","text":"x","completion_tokens":2,"finish_reason":"stop"}`+"\n")
	db, _ := ingesttest.Index(t, root)
	srv := httptest.NewServer(web.Handler(web.Options{Ask: query.Local{Src: db}}))
	defer srv.Close()
	c := srv.Client()
	if _, body, _ := get(t, c, srv.URL+"/dataset?d=s"); !strings.Contains(body, "view=accept") {
		t.Errorf("the page of a dataset with spec counts has no accept tab:\n%s", body)
	}
	if _, body, _ := get(t, c, srv.URL+"/dataset?d=n"); strings.Contains(body, "view=accept") {
		t.Errorf("the page of a dataset without spec counts has an accept tab")
	}
	code, body, _ := get(t, c, srv.URL+"/dataset?d=s&view=accept")
	if code != http.StatusOK {
		t.Fatalf("the accept view: %d\n%s", code, body)
	}
	var got []string
	for _, m := range regexp.MustCompile(`data-col="id" data-v="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		got = append(got, m[1])
	}
	var accepts []string
	for _, m := range regexp.MustCompile(`data-col="accept_length" data-v="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		accepts = append(accepts, m[1])
	}
	if fmt.Sprint(got) != "[d a c e]" || fmt.Sprint(accepts) != "[1.50 2.00 3.00 4.00]" || !strings.Contains(body, "4 answers with an accept length, 1 without") {
		t.Errorf("the accept view lists %v at %v, want [d a c e] at [1.50 2.00 3.00 4.00], and counts the answer without one\n%s", got, accepts, body)
	}
	if code, body, _ := get(t, c, srv.URL+"/dataset?d=n&view=accept"); code != http.StatusOK || !strings.Contains(body, "no answer carries spec_verify_ct") {
		t.Errorf("the accept view of a dataset without spec counts: %d\n%s", code, body)
	}
}
