// Command benchgen writes synthetic generation datasets for gendex's
// benchmarks: ROOT/<dataset>/prompts.jsonl and ROOT/<dataset>/raw_responses.jsonl,
// in four of the response shapes of README.md's "Formats it reads" (gendex's
// flat line, SGLang /generate, OpenAI chat.completion, ids only).
//
// Usage:
//
//	go run ./testdata/benchgen -root DIR [-datasets N] [-records N]
//	    [-shape flat|sglang|openai|ids[,...]] [-line-bytes N]
//	    [-missing F] [-dups F] [-seed N] [-now RFC3339] [-prefix P] [-jobs N]
//
// The output is a pure function of the flags: the same flags (with -now
// fixed) give byte-identical files. Memory is constant whatever the size:
// lines are built in one reused buffer and streamed to disk, so it can write
// multi-GB files. Datasets are written in parallel (-jobs), each from its own
// random stream, so parallelism does not change the output.
//
// What a dataset looks like:
//   - ids are <dataset>-0000001 ...; dataset i is named <prefix><NN>_<shape>,
//     with shapes taken from the -shape list in turn;
//   - a fraction -missing of the prompts get no response line;
//   - responses leave in a shuffled order, as from ~128 concurrent requests;
//   - a fraction -dups of response lines repeat a recent id with a different
//     answer (a retry), so "the first line counts" is tested;
//   - completion token counts follow a log-normal distribution capped at
//     max_new_tokens (8x the mean; capped answers finish with "length");
//     completion_tokens == len(output_ids) whenever output_ids is written,
//     and prompt_tokens == len(input_ids) of the prompt;
//   - finished_at (and SGLang's response_sent_to_client_ts, OpenAI's created)
//     rise through the hour that ends at -now, in file order.
//
// -line-bytes sets the mean line size. At 1000 bytes and above, the flat,
// SGLang and ids shapes carry output_ids (token ids 0..200000, skewed to the
// small ids as real vocabularies are) plus text, and the token count is sized
// to fill the line; below 1000 bytes only the ids shape carries output_ids,
// the others carry a short text and an independent, realistic token count.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// shape is a response line layout.
type shape string

const (
	shapeFlat   shape = "flat"   // gendex's own line: counts at top level
	shapeSGLang shape = "sglang" // SGLang /generate: counts in meta_info
	shapeOpenAI shape = "openai" // chat.completion: counts in usage
	shapeIDs    shape = "ids"    // {"id","output_ids"}: count = len(output_ids)
)

const (
	eosToken       = 163586    // Kimi's end-of-turn id, SGLang's matched stop
	maxTokenID     = 200000    // vocabulary size of the synthetic ids
	idsThreshold   = 1000      // -line-bytes from which lines carry output_ids
	charsPerToken  = 4         // text bytes per completion token
	inFlight       = 128       // concurrent requests: how far responses are shuffled
	recentIDs      = 256       // how far back a duplicate may reach
	span           = time.Hour // finished_at spread
	smallMedianTok = 300       // token median for lines without output_ids
	sigma          = 0.9       // log-normal shape of the token counts
	server         = "http://127.0.0.1:30000"
)

// config is the parsed command line.
type config struct {
	root      string
	datasets  int
	records   int
	shapes    []shape
	lineBytes int
	missing   float64
	dups      float64
	seed      uint64
	now       time.Time
	prefix    string
	jobs      int
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchgen: %v\n", err)
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "benchgen: %v\n", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("benchgen", flag.ContinueOnError)
	cfg := &config{}
	var shapes, now string
	fs.StringVar(&cfg.root, "root", "", "output root: one folder per dataset is written under it (required)")
	fs.IntVar(&cfg.datasets, "datasets", 1, "number of datasets")
	fs.IntVar(&cfg.records, "records", 1000, "prompts per dataset")
	fs.StringVar(&shapes, "shape", "flat", "response shape: flat, sglang, openai or ids; a comma list is used dataset by dataset in turn")
	fs.IntVar(&cfg.lineBytes, "line-bytes", 2000, "approximate mean response line size in bytes (>= 1000 adds output_ids)")
	fs.Float64Var(&cfg.missing, "missing", 0.01, "fraction of prompts without a response")
	fs.Float64Var(&cfg.dups, "dups", 0.001, "fraction of response lines that repeat an earlier id")
	fs.Uint64Var(&cfg.seed, "seed", 1, "random seed")
	fs.StringVar(&now, "now", "", "end of the finished_at hour, RFC3339 (default: the current time); fix it for byte-identical output")
	fs.StringVar(&cfg.prefix, "prefix", "B", "dataset name prefix: <prefix><NN>_<shape>")
	fs.IntVar(&cfg.jobs, "jobs", runtime.GOMAXPROCS(0), "datasets written at once")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case cfg.root == "":
		return nil, fmt.Errorf("-root is required")
	case cfg.datasets < 1 || cfg.records < 1:
		return nil, fmt.Errorf("-datasets and -records must be at least 1")
	case cfg.lineBytes < 1:
		return nil, fmt.Errorf("-line-bytes must be positive")
	case cfg.missing < 0 || cfg.missing >= 1 || cfg.dups < 0 || cfg.dups >= 1:
		return nil, fmt.Errorf("-missing and -dups must be in [0, 1)")
	case cfg.jobs < 1:
		cfg.jobs = 1
	}
	for _, s := range strings.Split(shapes, ",") {
		switch sh := shape(strings.TrimSpace(s)); sh {
		case shapeFlat, shapeSGLang, shapeOpenAI, shapeIDs:
			cfg.shapes = append(cfg.shapes, sh)
		default:
			return nil, fmt.Errorf("unknown -shape %q (want flat, sglang, openai or ids)", s)
		}
	}
	cfg.now = time.Now().UTC()
	if now != "" {
		t, err := time.Parse(time.RFC3339Nano, now)
		if err != nil {
			return nil, fmt.Errorf("-now: %v", err)
		}
		cfg.now = t.UTC()
	}
	return cfg, nil
}

// stats is what one dataset's generation wrote.
type stats struct {
	name                    string
	shape                   shape
	promptLines, respLines  int64
	promptBytes, respBytes  int64
	answered, missing, dups int64
	err                     error
}

func run(cfg *config) error {
	start := time.Now()
	results := make([]stats, cfg.datasets)
	sem := make(chan struct{}, cfg.jobs)
	var wg sync.WaitGroup
	for i := range cfg.datasets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i] = writeDataset(cfg, i)
		}()
	}
	wg.Wait()

	var tot stats
	for _, r := range results {
		if r.err != nil {
			return fmt.Errorf("dataset %s: %w", r.name, r.err)
		}
		dir := filepath.Join(cfg.root, r.name)
		fmt.Fprintf(os.Stderr, "%s/prompts.jsonl        %10d lines %12d bytes\n", dir, r.promptLines, r.promptBytes)
		fmt.Fprintf(os.Stderr, "%s/raw_responses.jsonl  %10d lines %12d bytes (%s; %d answered, %d missing, %d duplicate lines, %d B/line)\n",
			dir, r.respLines, r.respBytes, r.shape, r.answered, r.missing, r.dups, r.respBytes/max(r.respLines, 1))
		tot.promptLines += r.promptLines
		tot.promptBytes += r.promptBytes
		tot.respLines += r.respLines
		tot.respBytes += r.respBytes
		tot.answered += r.answered
		tot.missing += r.missing
		tot.dups += r.dups
	}
	fmt.Fprintf(os.Stderr, "benchgen: wrote %d datasets under %s: %d prompt lines (%d bytes), %d response lines (%d bytes; %d answered, %d missing, %d duplicates) in %s\n",
		cfg.datasets, cfg.root, tot.promptLines, tot.promptBytes, tot.respLines, tot.respBytes,
		tot.answered, tot.missing, tot.dups, time.Since(start).Round(time.Millisecond))
	return nil
}

// pending is a prompt whose response is "in flight".
type pending struct {
	index        int // 1-based prompt number
	promptTokens int
}

// gen writes one dataset. Two random streams keep the prompts file
// independent of the response layout.
type gen struct {
	cfg       *config
	name      string
	shape     shape
	withIDs   bool
	meanTok   float64 // mean completion tokens before the cap
	maxTok    int     // max_new_tokens: the cap
	textBytes int     // text size of a line without output_ids
	prng      *rand.Rand
	rrng      *rand.Rand
	line      []byte
	respLine  int64 // response lines written, for finished_at
	startMs   int64
	stepMs    float64
}

func writeDataset(cfg *config, i int) (st stats) {
	sh := cfg.shapes[i%len(cfg.shapes)]
	g := &gen{
		cfg:   cfg,
		name:  fmt.Sprintf("%s%02d_%s", cfg.prefix, i+1, sh),
		shape: sh,
		prng:  rand.New(rand.NewPCG(cfg.seed, uint64(2*i+1))),
		rrng:  rand.New(rand.NewPCG(cfg.seed, uint64(2*i+2))),
	}
	st.name, st.shape = g.name, sh
	g.calibrate()
	g.startMs = cfg.now.Add(-span).UnixMilli()
	g.stepMs = float64(span.Milliseconds()) / float64(cfg.records)

	dir := filepath.Join(cfg.root, g.name)
	if st.err = os.MkdirAll(dir, 0o755); st.err != nil {
		return st
	}
	pf, err := newOut(filepath.Join(dir, "prompts.jsonl"))
	if err != nil {
		st.err = err
		return st
	}
	rf, err := newOut(filepath.Join(dir, "raw_responses.jsonl"))
	if err != nil {
		pf.close()
		st.err = err
		return st
	}

	// Prompts are written in order; each answered one joins the in-flight
	// window, from which a random one finishes whenever the window is full.
	window := make([]pending, 0, inFlight)
	recent := make([]pending, 0, recentIDs)
	emit := func(p pending) {
		// Sometimes a recent id comes back a second time first (a retry).
		for len(recent) > 0 && g.rrng.Float64() < cfg.dups {
			rf.write(g.response(recent[g.rrng.IntN(len(recent))]))
			st.dups++
		}
		rf.write(g.response(p))
		if len(recent) < recentIDs {
			recent = append(recent, p)
		} else {
			recent[g.rrng.IntN(recentIDs)] = p
		}
	}
	finishOne := func() {
		k := g.rrng.IntN(len(window))
		p := window[k]
		window[k] = window[len(window)-1]
		window = window[:len(window)-1]
		emit(p)
	}
	for n := 1; n <= cfg.records; n++ {
		promptTokens := g.promptTokens()
		pf.write(g.prompt(n, promptTokens))
		if g.prng.Float64() < cfg.missing {
			st.missing++
			continue
		}
		st.answered++
		if len(window) == inFlight {
			finishOne()
		}
		window = append(window, pending{n, promptTokens})
	}
	for len(window) > 0 {
		finishOne()
	}

	st.promptLines, st.promptBytes = pf.lines, pf.bytes
	st.respLines, st.respBytes = rf.lines, rf.bytes
	if err := pf.close(); err != nil {
		st.err = err
	}
	if err := rf.close(); err != nil && st.err == nil {
		st.err = err
	}
	return st
}

// calibrate sets the token distribution so that the mean line is about
// -line-bytes: it renders a line with no tokens to learn the fixed part.
func (g *gen) calibrate() {
	lb := g.cfg.lineBytes
	g.withIDs = g.shape == shapeIDs || (lb >= idsThreshold && g.shape != shapeOpenAI)
	if !g.withIDs && lb < idsThreshold {
		// Short lines: realistic counts, a short text fills the line.
		g.meanTok = smallMedianTok * math.Exp(sigma*sigma/2)
		g.maxTok = 8 * int(g.meanTok)
		g.textBytes = 0
		fixed := len(g.render(pending{1, 100}, int(g.meanTok), 0, 0)) // one word of text
		g.textBytes = max(lb-fixed, 8)
		return
	}
	perToken := 0.0
	if g.withIDs {
		perToken += meanIDBytes()
	}
	if g.shape != shapeIDs {
		perToken += charsPerToken
	}
	fixed := len(g.render(pending{1, 100}, 0, 0, 0))
	g.meanTok = max(float64(lb-fixed)/perToken, 1)
	g.maxTok = max(8*int(math.Round(g.meanTok)), 16)
}

// meanIDBytes is the mean JSON size of one token id plus its comma.
func meanIDBytes() float64 {
	r := rand.New(rand.NewPCG(0, 0))
	var n int
	const samples = 100000
	for range samples {
		n += len(strconv.Itoa(tokenID(r))) + 1
	}
	return float64(n) / samples
}

// tokenID draws a token id: like real vocabularies, most tokens of a text
// are among the first ids (common words), the rest spread to maxTokenID.
func tokenID(r *rand.Rand) int {
	switch u := r.IntN(10); {
	case u < 5:
		return r.IntN(5000)
	case u < 8:
		return r.IntN(50000)
	}
	return r.IntN(maxTokenID + 1)
}

func (g *gen) promptTokens() int {
	return 16 + g.prng.IntN(48)
}

// prompt renders {"id","input_ids":[...],"max_new_tokens"}.
func (g *gen) prompt(n, tokens int) []byte {
	b := g.line[:0]
	b = append(b, `{"id":`...)
	b = g.appendID(b, n)
	b = append(b, `,"input_ids":[`...)
	for k := range tokens {
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(tokenID(g.prng)), 10)
	}
	b = append(b, `],"max_new_tokens":`...)
	b = strconv.AppendInt(b, int64(g.maxTok), 10)
	b = append(b, "}\n"...)
	g.line = b
	return b
}

func (g *gen) appendID(b []byte, n int) []byte {
	b = append(b, '"')
	b = append(b, g.name...)
	b = append(b, '-')
	s := strconv.Itoa(n)
	for range 7 - len(s) {
		b = append(b, '0')
	}
	b = append(b, s...)
	return append(b, '"')
}

// response draws one answer to p and renders it.
func (g *gen) response(p pending) []byte {
	r := g.rrng
	mu := math.Log(g.meanTok) - sigma*sigma/2
	tokens := int(math.Round(math.Exp(mu + sigma*r.NormFloat64())))
	tokens = min(max(tokens, 1), g.maxTok)
	text := g.textBytes
	if g.textBytes > 0 {
		text = g.textBytes/2 + r.IntN(g.textBytes+1) // mean textBytes
	} else if g.shape != shapeIDs {
		text = tokens * charsPerToken
	}
	ms := g.startMs + int64(float64(g.respLine)*g.stepMs) + int64(r.IntN(50))
	g.respLine++
	return g.render(p, tokens, text, ms)
}

// render writes one response line of g's shape: tokens completion tokens,
// about text bytes of text, finished at Unix ms.
func (g *gen) render(p pending, tokens, text int, ms int64) []byte {
	r := g.rrng
	finish := "stop"
	if tokens >= g.maxTok && g.maxTok > 0 {
		finish = "length"
	}
	cached := 0
	if r.IntN(2) == 0 {
		cached = p.promptTokens / 16 * 16
	}
	reasoning := 0
	if r.IntN(4) == 0 {
		reasoning = tokens * (20 + r.IntN(60)) / 100
	}
	latency := 0.2 + r.Float64()*2 + float64(tokens)/11 // ~11 tok/s per request under load
	t := time.UnixMilli(ms).UTC()

	b := g.line[:0]
	b = append(b, `{"id":`...)
	b = g.appendID(b, p.index)
	switch g.shape {
	case shapeIDs:
		b = g.appendOutputIDs(b, tokens, finish)
	case shapeFlat:
		b = g.appendOutputIDs(b, tokens, finish)
		b = append(b, `,"text":`...)
		b = g.appendText(b, text)
		b = appendInt(b, "prompt_tokens", p.promptTokens)
		b = appendInt(b, "completion_tokens", tokens)
		b = appendInt(b, "cached_tokens", cached)
		b = appendInt(b, "reasoning_tokens", reasoning)
		b = append(b, `,"finish_reason":"`...)
		b = append(b, finish...)
		b = append(b, '"')
		if finish == "stop" {
			b = appendInt(b, "matched_stop", eosToken)
		} else {
			b = append(b, `,"matched_stop":null`...)
		}
		b = append(b, `,"e2e_latency":`...)
		b = strconv.AppendFloat(b, latency, 'f', 3, 64)
		b = append(b, `,"finished_at":"`...)
		b = t.AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
		b = append(b, `","server":"`+server+`"`...)
	case shapeSGLang:
		b = append(b, `,"text":`...)
		b = g.appendText(b, text)
		b = g.appendOutputIDs(b, tokens, finish)
		b = append(b, `,"meta_info":{"id":"`...)
		b = fmt.Appendf(b, "%016x%016x", r.Uint64(), r.Uint64())
		if finish == "stop" {
			b = append(b, `","finish_reason":{"type":"stop","matched":163586}`...)
		} else {
			b = append(b, `","finish_reason":{"type":"length","length":`...)
			b = strconv.AppendInt(b, int64(tokens), 10)
			b = append(b, '}')
		}
		b = appendInt(b, "prompt_tokens", p.promptTokens)
		b = append(b, `,"weight_version":"default","num_retractions":0`...)
		b = appendInt(b, "reasoning_tokens", reasoning)
		b = appendInt(b, "completion_tokens", tokens)
		b = appendInt(b, "cached_tokens", cached)
		b = append(b, `,"dp_rank":null,"e2e_latency":`...)
		b = strconv.AppendFloat(b, latency, 'f', 3, 64)
		b = append(b, `,"response_sent_to_client_ts":`...)
		b = strconv.AppendFloat(b, float64(ms)/1000, 'f', 3, 64)
		b = append(b, '}')
	case shapeOpenAI:
		b = append(b, `,"object":"chat.completion","created":`...)
		b = strconv.AppendInt(b, ms/1000, 10)
		b = append(b, `,"model":"kimi-k2.5","choices":[{"index":0,"message":{"role":"assistant","content":`...)
		b = g.appendText(b, text)
		b = append(b, `,"reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"`...)
		b = append(b, finish...)
		if finish == "stop" {
			b = append(b, `","matched_stop":163586}]`...)
		} else {
			b = append(b, `","matched_stop":null}]`...)
		}
		b = append(b, `,"usage":{"prompt_tokens":`...)
		b = strconv.AppendInt(b, int64(p.promptTokens), 10)
		b = appendInt(b, "total_tokens", p.promptTokens+tokens)
		b = appendInt(b, "completion_tokens", tokens)
		b = append(b, `,"prompt_tokens_details":null`...)
		b = appendInt(b, "reasoning_tokens", reasoning)
		b = append(b, '}')
	}
	b = append(b, "}\n"...)
	g.line = b
	return b
}

// appendInt appends ,"key":v.
func appendInt(b []byte, key string, v int) []byte {
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	return strconv.AppendInt(b, int64(v), 10)
}

// appendOutputIDs appends ,"output_ids":[...] with n ids when g's lines
// carry them; a stopped answer ends with the end-of-turn id.
func (g *gen) appendOutputIDs(b []byte, n int, finish string) []byte {
	if !g.withIDs {
		return b
	}
	b = append(b, `,"output_ids":[`...)
	for k := range n {
		if k > 0 {
			b = append(b, ',')
		}
		id := tokenID(g.rrng)
		if k == n-1 && finish == "stop" {
			id = eosToken
		}
		b = strconv.AppendInt(b, int64(id), 10)
	}
	return append(b, ']')
}

// words the synthetic text is made of; "\\n" and "\\\"" are JSON escapes,
// so every text exercises the string decoder of the reader.
var words = strings.Fields(`the a of to and in is that for it as with on be by this are from
or at an not can we which if will each value function return data model token
cache request server queue batch answer step think first then because so code
error list string number prompt output input line file index count result
time second first last more less when where how why use make`)

// appendText appends a JSON string of about n bytes (at least one word).
func (g *gen) appendText(b []byte, n int) []byte {
	r := g.rrng
	b = append(b, '"')
	start := len(b)
	for first := true; first || len(b)-start < n; first = false {
		switch u := r.IntN(40); {
		case u == 0:
			b = append(b, `\n`...)
		case u == 1:
			b = append(b, `. \"`...)
		}
		b = append(b, words[r.IntN(len(words))]...)
		b = append(b, ' ')
	}
	b = b[:len(b)-1] // the last space
	return append(b, '"')
}

// out is a buffered output file that counts what it wrote.
type out struct {
	f            *os.File
	w            *bufio.Writer
	lines, bytes int64
	err          error
}

func newOut(path string) (*out, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &out{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

// write appends one line; the first error is kept and returned by close.
func (o *out) write(line []byte) {
	if o.err != nil {
		return
	}
	n, err := o.w.Write(line)
	o.bytes += int64(n)
	o.lines++
	o.err = err
}

func (o *out) close() error {
	if err := o.w.Flush(); err != nil && o.err == nil {
		o.err = err
	}
	if err := o.f.Close(); err != nil && o.err == nil {
		o.err = err
	}
	return o.err
}
