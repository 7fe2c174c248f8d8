package web_test

import (
	"html"
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

// href finds a page's links to its own site (src too: charts, scripts).
var href = regexp.MustCompile(`(?:href|src)="(/[^"]*)"`)

// crawl follows every link of the site from its first page, breadth
// first, up to limit pages, and fails the test for each that does not
// answer 200: a link the site makes is a page it serves (a parameter it
// writes is one it takes). It returns how many pages it fetched.
func crawl(t *testing.T, srv *httptest.Server, limit int) int {
	t.Helper()
	seen := map[string]bool{"/": true}
	queue := []string{"/"}
	for len(queue) > 0 && len(seen) <= limit {
		path := queue[0]
		queue = queue[1:]
		code, body, _ := get(t, srv.Client(), srv.URL+path)
		if code != http.StatusOK {
			t.Errorf("%s (a link the site makes): %d\n%s", path, code, body)
			continue
		}
		for _, m := range href.FindAllStringSubmatch(body, -1) {
			if p := html.UnescapeString(m[1]); !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	return len(seen)
}

// TestEveryLinkAnswers: every link of the site's pages, over datasets with
// answers of every kind the views list (cut, failed, missing, hostile,
// with the drafter's counts), is a page it serves.
func TestEveryLinkAnswers(t *testing.T) {
	if n := crawl(t, newSite(t, ""), 400); n < 15 {
		t.Errorf("the site links %d pages: the crawl does not test", n)
	}
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "s", "raw_responses.jsonl"), strings.Join([]string{
		`{"id":"a","text":"x","completion_tokens":20,"spec_verify_ct":10,"finish_reason":"stop"}`,
		`{"id":"b","text":"x","completion_tokens":20,"finish_reason":"length"}`,
	}, "\n")+"\n")
	db, _ := ingesttest.Index(t, root)
	srv := httptest.NewServer(web.Handler(web.Options{Ask: query.Local{Src: db}, Read: flatText}))
	defer srv.Close()
	if n := crawl(t, srv, 400); n < 10 {
		t.Errorf("the site links %d pages: the crawl does not test", n)
	}
}
