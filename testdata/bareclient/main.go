// Command bareclient is the floor gen's client is measured against: it
// sends the requests gen sends for token-id prompts (SGLang's POST
// /generate, {"rid","input_ids","sampling_params":{"max_new_tokens"},
// "stream":false}) at the same concurrency, and only appends each answer's
// body, as it comes, to one file (fsynced at the end). No parsing of the
// answers, no index, no retries: a failed request stops it.
//
//	go build -o bareclient ./testdata/bareclient
//	gendex sim --listen 127.0.0.1:30077 &
//	bareclient -server http://127.0.0.1:30077 -prompts root/B/prompts.jsonl -out bodies.jsonl
//
// It prints the answers/s of the whole run (from the first request sent to
// the fsync) on stdout; README's "Measured numbers", gen, compares gen's
// with it (.ci/bench-gen does both, alternated).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	server := flag.String("server", "http://127.0.0.1:30000", "the server's URL")
	prompts := flag.String("prompts", "", "a prompts.jsonl of token-id prompts ({\"id\", \"input_ids\"})")
	out := flag.String("out", "bodies.jsonl", "the file the answers' bodies are appended to")
	concurrency := flag.Int("concurrency", 128, "requests in flight (gen's default)")
	maxNew := flag.Int("max-new-tokens", 16, "sampling_params.max_new_tokens of every request")
	flag.Parse()
	if *prompts == "" {
		fmt.Fprintln(os.Stderr, "bareclient: give -prompts FILE")
		os.Exit(2)
	}
	bodies, err := requests(*prompts, *maxNew)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bareclient:", err)
		os.Exit(1)
	}
	n, elapsed, err := run(*server+"/generate", bodies, *out, *concurrency)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bareclient:", err)
		os.Exit(1)
	}
	fmt.Printf("%d answers in %.3f s: %.0f answers/s\n", n, elapsed.Seconds(), float64(n)/elapsed.Seconds())
}

// requests reads the prompt file and returns each prompt's request body
// but its rid (made when it is sent, as gen makes one per attempt).
func requests(path string, maxNew int) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var p struct {
			InputIDs []int `json:"input_ids"`
		}
		if err := json.Unmarshal(line, &p); err != nil || len(p.InputIDs) == 0 {
			return nil, fmt.Errorf("%s:%d: not a token-id prompt (%v)", path, i+1, err)
		}
		ids, _ := json.Marshal(p.InputIDs)
		b := append([]byte(`,"input_ids":`), ids...)
		b = append(b, `,"sampling_params":{"max_new_tokens":`...)
		b = strconv.AppendInt(b, int64(maxNew), 10)
		out = append(out, append(b, `},"stream":false}`...))
	}
	return out, nil
}

// run sends every body at concurrency, appending the answers to out.
func run(url string, bodies [][]byte, out string, concurrency int) (int, time.Duration, error) {
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 4<<20)
	var mu sync.Mutex
	var next, done atomic.Int64
	var firstErr atomic.Value
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrency}}
	start := time.Now()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			var req []byte
			for {
				i := next.Add(1) - 1
				if i >= int64(len(bodies)) || firstErr.Load() != nil {
					return
				}
				req = append(append(append(req[:0], `{"rid":"bare-`...), strconv.FormatInt(i, 10)...), '"')
				req = append(req, bodies[i]...)
				resp, err := client.Post(url, "application/json", bytes.NewReader(req))
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, body)
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				body = bytes.TrimRight(body, "\n")
				mu.Lock()
				w.Write(body)
				w.WriteByte('\n')
				mu.Unlock()
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return int(done.Load()), 0, err
	}
	if err := w.Flush(); err != nil {
		return 0, 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, 0, err
	}
	return int(done.Load()), time.Since(start), nil
}
