package web_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/query/web"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hostile is model output that would run if a page put it in as HTML.
const hostile = `<img src=x onerror="document.title='pwned'"><script>document.title='pwned'</script>`

// flatText reads the text of gendex's flat lines, as main's reader does
// for every shape.
func flatText(line []byte) (web.Answer, error) {
	var a struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return web.Answer{}, err
	}
	if a.Text == nil {
		return web.Answer{Shape: "flat", NoText: "no text"}, nil
	}
	return web.Answer{Shape: "flat", Text: *a.Text, HasText: true}, nil
}

// newSite indexes a dataset with a hostile answer, a cut one, an error,
// and a conversation whose assistant turn was regenerated, and serves it.
func newSite(t *testing.T, token string) *httptest.Server {
	t.Helper()
	root := t.TempDir()
	hostileJSON, _ := json.Marshal(hostile)
	writeFile(t, filepath.Join(root, "d", "prompts.jsonl"), strings.Join([]string{
		`{"id":"a","messages":[{"role":"user","content":` + string(hostileJSON) + `}]}`,
		`{"id":"b","prompt":"say more"}`,
		`{"id":"c","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"as written"},{"role":"user","content":"and then?"}]}`,
		`{"id":"e","prompt":"too long"}`,
		`{"id":"m","prompt":"not asked yet"}`,
	}, "\n")+"\n")
	writeFile(t, filepath.Join(root, "d", "raw_responses.jsonl"), strings.Join([]string{
		`{"id":"a","text":` + string(hostileJSON) + `,"completion_tokens":9,"finish_reason":"stop","model":"m1"}`,
		`{"id":"b","text":"cut he","completion_tokens":4,"finish_reason":"length"}`,
		`{"id":"c","turns":[{"text":"regenerated one","finish_reason":"stop"},{"text":"the last turn","finish_reason":"stop"}],"completion_tokens":7,"finish_reason":"stop"}`,
	}, "\n")+"\n")
	writeFile(t, filepath.Join(root, "d", "errors.jsonl"), `{"id":"e","error":"context_length_exceeded: `+strings.ReplaceAll(hostile, `"`, `'`)+`"}`+"\n")
	db, _ := ingesttest.Index(t, root)
	h := web.Handler(web.Options{Ask: query.Local{Src: db}, Read: flatText, Token: token, Index: "test.db", Now: time.Now})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, c *http.Client, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// TestPagesEscapeModelOutput: the answer page, the dataset's lists and the
// error view show hostile text as text (escaped), never as markup; and
// every page says, in its Content-Security-Policy, that no inline script
// runs and nothing comes from another host.
func TestPagesEscapeModelOutput(t *testing.T) {
	srv := newSite(t, "")
	c := srv.Client()
	pages := []string{"/", "/live", "/dataset?d=d", "/dataset?d=d&view=errors", "/dataset?d=d&view=cut",
		"/dataset?d=d&view=missing", "/dataset?d=d&view=sample", "/answer?d=d&id=a", "/answer?d=d&id=e&stage=errors", "/answer?d=d&id=c"}
	for _, p := range pages {
		code, body, h := get(t, c, srv.URL+p)
		if code != http.StatusOK {
			t.Errorf("%s: %d\n%s", p, code, body)
			continue
		}
		if strings.Contains(body, "<script>document") || strings.Contains(body, "<img src=x") {
			t.Errorf("%s holds the model's markup unescaped", p)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", p, csp)
		}
	}
	_, body, _ := get(t, c, srv.URL+"/answer?d=d&id=a")
	if !strings.Contains(body, "&lt;img src=x onerror=") || !strings.Contains(body, "&lt;script&gt;document.title=") {
		t.Errorf("the answer page does not show the hostile text as text:\n%s", body)
	}
	_, body, _ = get(t, c, srv.URL+"/answer?d=d&id=c")
	for _, want := range []string{"regenerated one", "the last turn", "as written", "regenerated</b>", "and then?"} {
		if !strings.Contains(body, want) {
			t.Errorf("the conversation's page lacks %q", want)
		}
	}
	if n := strings.Count(body, `>the last turn</pre>`); n != 1 {
		t.Errorf("the conversation's last turn is shown %d times, want once (in the conversation)", n)
	}
	_, body, _ = get(t, c, srv.URL+"/dataset?d=d&view=cut")
	if !strings.Contains(body, `id=b`) || strings.Contains(body, `id=a&amp;`) {
		t.Errorf("the cut view does not list exactly the cut answer:\n%s", body)
	}
	_, body, _ = get(t, c, srv.URL+"/dataset?d=d&finish=length")
	if !strings.Contains(body, `id=b`) || strings.Contains(body, `id=a&amp;`) || !strings.Contains(body, "length (1)") || !strings.Contains(body, "stop (2)") {
		t.Errorf("the answers filtered by finish reason length:\n%s", body)
	}
	_, body, _ = get(t, c, srv.URL+"/dataset?d=d&view=missing")
	if !strings.Contains(body, `>m<`) || strings.Contains(body, `>a<`) {
		t.Errorf("the missing view does not list exactly the missing prompt:\n%s", body)
	}
}

// TestPagesNameNoOtherHost: no page or asset loads anything from another
// host (SVG's xmlns is a name, not a load).
func TestPagesNameNoOtherHost(t *testing.T) {
	srv := newSite(t, "")
	c := srv.Client()
	load := regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?\s*(https?:)?//|url\(\s*["']?(https?:)?//|@import|fetch\(\s*["'](https?:)?//`)
	for _, p := range []string{"/", "/dataset?d=d", "/answer?d=d&id=a", "/static/app.js", "/static/style.css", "/chart.svg", "/chart.svg?since=30m"} {
		code, body, _ := get(t, c, srv.URL+p)
		if code != http.StatusOK {
			t.Errorf("%s: %d", p, code)
		}
		if m := load.FindString(body); m != "" {
			t.Errorf("%s loads from another host: %q", p, m)
		}
	}
}

// TestReadOnlyAndToken: only GET and HEAD are served; with a token, a
// request without it gets 401, ?token= once sets a cookie that serves the
// next requests, and a wrong token is refused.
func TestReadOnlyAndToken(t *testing.T) {
	srv := newSite(t, "s3cret")
	c := srv.Client()
	if code, _, _ := get(t, c, srv.URL+"/"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, _, _ := get(t, c, srv.URL+"/?token=wrong"); code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/dataset?d=d", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a bearer token: %d", resp.StatusCode)
	}
	c.Jar, _ = cookiejar.New(nil)
	code, body, _ := get(t, c, srv.URL+"/?token=s3cret")
	if code != http.StatusOK || !strings.Contains(body, "Progress") {
		t.Errorf("?token= once: %d", code)
	}
	if code, _, _ := get(t, c, srv.URL+"/dataset?d=d"); code != http.StatusOK {
		t.Errorf("after ?token=, the cookie: %d", code)
	}
	for _, m := range []string{"POST", "PUT", "DELETE"} {
		req, _ := http.NewRequest(m, srv.URL+"/", strings.NewReader("x"))
		req.Header.Set("Authorization", "Bearer s3cret")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405", m, resp.StatusCode)
		}
	}
}

// TestPaging: the answers view pages by its own links, each record once,
// forwards and back.
func TestPaging(t *testing.T) {
	root := t.TempDir()
	var lines []string
	for i := range 120 {
		lines = append(lines, `{"id":"r`+string(rune('a'+i/26%26))+string(rune('a'+i%26))+`","text":"x","completion_tokens":1,"finish_reason":"stop"}`)
	}
	writeFile(t, filepath.Join(root, "d", "raw_responses.jsonl"), strings.Join(lines, "\n")+"\n")
	db, _ := ingesttest.Index(t, root)
	srv := httptest.NewServer(web.Handler(web.Options{Ask: query.Local{Src: db}}))
	defer srv.Close()
	idRe := regexp.MustCompile(`data-col="id" data-v="([^"]+)"`)
	next := regexp.MustCompile(`rel="next" href="([^"]+)"`)
	prev := regexp.MustCompile(`rel="prev" href="([^"]+)"`)
	seen := map[string]int{}
	url := srv.URL + "/dataset?d=d"
	var pages []string
	for n := 0; url != ""; n++ {
		if n > 5 {
			t.Fatal("paging does not end")
		}
		_, body, _ := get(t, srv.Client(), url)
		pages = append(pages, body)
		for _, m := range idRe.FindAllStringSubmatch(body, -1) {
			seen[m[1]]++
		}
		url = ""
		if m := next.FindStringSubmatch(body); m != nil {
			url = srv.URL + strings.ReplaceAll(m[1], "&amp;", "&")
		}
	}
	if len(seen) != 120 || len(pages) != 3 {
		t.Errorf("%d ids over %d pages, want 120 over 3", len(seen), len(pages))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("id %s on %d pages", id, n)
		}
	}
	// Back from the last page: the page before it is the second, exactly.
	m := prev.FindStringSubmatch(pages[2])
	if m == nil {
		t.Fatal("the last page has no link back")
	}
	_, body, _ := get(t, srv.Client(), srv.URL+strings.ReplaceAll(m[1], "&amp;", "&"))
	if a, b := idRe.FindAllString(body, -1), idRe.FindAllString(pages[1], -1); strings.Join(a, " ") != strings.Join(b, " ") {
		t.Errorf("back from the last page:\n%v\nwant the second page:\n%v", a, b)
	}
}

// TestConcurrentPages: a page's live part, its charts and other tabs ask
// at once; every answer is whole (run with -race).
func TestConcurrentPages(t *testing.T) {
	srv := newSite(t, "")
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for range 8 {
		wg.Go(func() {
			for _, p := range []string{"/live", "/chart.svg", "/dataset?d=d", "/answer?d=d&id=c", "/dataset?d=d&view=sample"} {
				resp, err := srv.Client().Get(srv.URL + p)
				if err != nil {
					errs <- err.Error()
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte("</")) {
					errs <- fmt.Sprintf("%s: %d", p, resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
