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

// newSampledSite serves a dataset of 3 samples per prompt (gen
// --samples 3): 40 prompts each answered 3 times (p05's sample 1
// failed instead), one prompt not answered yet (p41).
func newSampledSite(t *testing.T) *httptest.Server {
	t.Helper()
	root := t.TempDir()
	var prompts, answers strings.Builder
	for i := 1; i <= 41; i++ {
		fmt.Fprintf(&prompts, `{"id":"p%02d","prompt":"prompt %d"}`+"\n", i, i)
		for s := range 3 {
			if i <= 40 && (i != 5 || s != 1) {
				fmt.Fprintf(&answers, `{"sample":%d,"samples":3,"id":"p%02d","text":"answer p%02d/%d","completion_tokens":3,"spec_verify_ct":%d,"finish_reason":"stop"}`+"\n", s, i, i, s, 1+s)
			}
		}
	}
	writeFile(t, filepath.Join(root, "s", "prompts.jsonl"), prompts.String())
	writeFile(t, filepath.Join(root, "s", "raw_responses.jsonl"), answers.String())
	writeFile(t, filepath.Join(root, "s", "errors.jsonl"), `{"sample":1,"samples":3,"id":"p05","error":"context_length_exceeded: too long"}`+"\n")
	db, _ := ingesttest.Index(t, root)
	srv := httptest.NewServer(web.Handler(web.Options{Ask: query.Local{Src: db}, Read: flatText}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSampledPages: in a dataset of several samples per prompt, the
// answers view names each answer by id and sample, its pages walk every
// answer once (page ends inside a prompt's samples included), each
// answer's page shows that sample's answer, its sample and its prompt,
// the missing view's links find each missing sample, and every link the
// site makes answers.
func TestSampledPages(t *testing.T) {
	srv := newSampledSite(t)
	row := regexp.MustCompile(`data-col="id" data-v="([^"]*)"[^>]*><a href="([^"]+)">[^<]*</a></td>\s*<td data-col="sample" data-v="([0-9]+)"`)
	next := regexp.MustCompile(`rel="next" href="([^"]+)"`)
	seen := map[string]int{}
	links := map[string]string{}
	url := srv.URL + "/dataset?d=s"
	for n := 0; url != ""; n++ {
		if n > 5 {
			t.Fatal("paging does not end")
		}
		code, body, _ := get(t, srv.Client(), url)
		if code != http.StatusOK {
			t.Fatalf("%s: %d\n%s", url, code, body)
		}
		for _, m := range row.FindAllStringSubmatch(body, -1) {
			u := m[1] + "/" + m[3]
			seen[u]++
			links[u] = strings.ReplaceAll(m[2], "&amp;", "&")
		}
		url = ""
		if m := next.FindStringSubmatch(body); m != nil {
			url = srv.URL + strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if len(seen) != 119 {
		t.Errorf("the answers view's pages name %d answers by id and sample; want 119", len(seen))
	}
	for u, n := range seen {
		if n != 1 {
			t.Errorf("%s on %d pages", u, n)
		}
	}
	for _, u := range []string{"p01/0", "p05/2", "p17/1", "p40/2"} {
		code, body, _ := get(t, srv.Client(), srv.URL+links[u])
		id, sample, _ := strings.Cut(u, "/")
		if code != http.StatusOK || !strings.Contains(body, "answer "+u) || !strings.Contains(body, "prompt "+strings.TrimLeft(id[1:], "0")) ||
			!strings.Contains(body, "<dt>sample</dt><dd>"+sample+"</dd>") {
			t.Errorf("%s's page (%s): %d; want its answer, its prompt and its sample\n%s", u, links[u], code, body)
		}
	}
	code, body, _ := get(t, srv.Client(), srv.URL+"/dataset?d=s&view=missing")
	missing := regexp.MustCompile(`href="(/dataset\?[^"]+)"`)
	found := 0
	for _, m := range missing.FindAllStringSubmatch(body, -1) {
		if l := strings.ReplaceAll(m[1], "&amp;", "&"); strings.Contains(l, "id=p41") {
			found++
			if c, b, _ := get(t, srv.Client(), srv.URL+l); c != http.StatusOK || !strings.Contains(b, "prompt 41") {
				t.Errorf("missing %s: %d; want p41's prompt\n%s", l, c, b)
			}
		}
	}
	if code != http.StatusOK || found != 3 {
		t.Errorf("the missing view: %d, %d links to p41's samples; want 3\n%s", code, found, body)
	}
	if code, body, _ := get(t, srv.Client(), srv.URL+"/answer?d=s&id=p05&sample=1&stage=errors"); code != http.StatusOK || !strings.Contains(body, "too long") {
		t.Errorf("p05 sample 1's error page: %d\n%s", code, body)
	}
	// The accept view, worst first: sample 2's answers (3 tokens in 3
	// verify steps), each linked as its own.
	_, body, _ = get(t, srv.Client(), srv.URL+"/dataset?d=s&view=accept")
	if m := row.FindStringSubmatch(body); m == nil || m[3] != "2" || !strings.Contains(m[2], "sample=2") {
		t.Errorf("the accept view's first row: %q; want a sample 2 answer, linked as it\n%s", m, body)
	}
	if n := crawl(t, srv, 400); n < 20 {
		t.Errorf("the site links %d pages: the crawl does not test", n)
	}
}
