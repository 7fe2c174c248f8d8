package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"gendex/ingest"
	"gendex/ingest/export"
	"gendex/ingest/gen"
	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/store"
	"gendex/store/prom"
)

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// runGen answers every dataset's prompts that have no answer yet, and
// indexes each answer as it is written.
func runGen(ctx context.Context, c *call, args []string) error {
	fs := c.flags()
	var servers stringList
	fs.Var(&servers, "server", "server URL (repeatable), or sim for the built-in simulator")
	api := fs.String("api", "auto", "auto: the route each server offers (SGLang: /generate; vLLM, llama.cpp and other OpenAI-compatible servers: chat, token ids to /v1/completions); or force generate, chat or completions")
	concurrency := fs.Int("concurrency", 0, "requests in flight at most, over all servers: a hard bound; by default (or 0) each server is kept at its own capacity, learned from its /metrics (128 on one without them), up to 4096 in all")
	out := fs.String("out", "", "write DIR/<dataset>/raw_responses.jsonl instead of beside the prompts")
	waitReady := fs.Duration("wait-ready", 30*time.Minute, "how long to wait for the servers to load and warm up")
	retryErrors, allowMixed := fs.Bool("retry-errors", false, "send again the prompts whose last outcome was an error"), fs.Bool("allow-mixed", false, "answer a dataset whose answers were made with other sampling or by another model or server (refused by default, before any request; 'gendex check' reports the mix)")
	turns := fs.String("turns", gen.TurnsAll, "all: regenerate every assistant turn of a multi-turn chat prompt, in order (earlier turns to turns.jsonl); last: ask only the last user turn, with the prompt's own assistant turns as context")
	apiKey := fs.String("api-key", "", "API key sent as a Bearer token (default $SGLANG_API_KEY); other users see it in ps: prefer --api-key-file or $SGLANG_API_KEY")
	apiKeyFile := fs.String("api-key-file", "", "read the API key from this file (a trailing newline is trimmed)")
	model := fs.String("model", "", "model name for the OpenAI-compatible endpoints")
	grace := fs.Duration("grace", 15*time.Second, "after an interrupt, how long to wait for the answers in flight")
	downLimit := fs.Duration("down-limit", 10*time.Minute, "stop (exit 1, nothing lost) when every server has been down this long mid-run; 0 waits for ever")
	stallAfter := fs.Duration("stall-after", gen.DefaultStallAfter, "a server that holds requests and replies to none of them for this long is stalled, though it answers /health or /metrics (one that answers neither is stalled within about a minute, whatever this says): gen records the requests it holds, their ages and the server's last answer, errors, metrics and /health (a stalled event; query runs), waits for it without sending them again, and gives it nothing new while it holds them; the default is longer than one long answer takes (30,000 tokens at 50 tokens/s), since with many requests in flight one ends every few seconds")
	requestTimeout := fs.Duration("request-timeout", time.Hour, "give one attempt this long to answer (0: no limit); running out counts toward --max-attempts")
	maxAttempts := fs.Int("max-attempts", 20, "failed attempts (429, 5xx, aborts, timeouts, lost connections) one prompt may get before it is recorded as an error")
	maxCrashes := fs.Int("max-crashes", 3, "times a server may go down with one prompt in flight before that prompt is recorded as an error")
	scrapeEvery := fs.Duration("scrape-every", gen.DefaultScrapeEvery, "how often to read each server's /metrics into the index (0: never)")
	shardFlag := fs.String("shard", "", "answer only the prompts whose id hashes to shard I of N (one task of a scheduler's array), into files of its own; give each shard its own --db on local disk")
	idPath := fs.String("id", "", "where the prompt lines keep their id, a dotted path such as meta.uid (as ingest --id takes it; remembered for the prompts files)")
	promptPath := fs.String("prompt", "", "where the prompt lines keep their prompt, a dotted path such as data.prompt: text, chat messages or ShareGPT conversations (or token ids)")
	redo := fs.String("redo", "", "truncated: ask again the answers cut at the token limit (those cut below this run's --max-new-tokens); FILE: ask again the ids it lists, one per line (as 'gendex query missing' prints them, or DATASET<TAB>ID; with --samples, every sample of an id, or the one a missing line names); each new answer replaces the old one everywhere, and its record the old one's")
	toolParser := fs.String("tool-call-parser", "", "for tool prompts sent to SGLang's /generate: the parser POST /parse_function_call reads the model's calls with (qwen25, kimi_k2, glm45, ...); default: the one the server runs (--tool-call-parser)")
	exportFormat := fs.String("export", "", "conversations or ids: write the training records while answers arrive (tokenized.jsonl, excluded.jsonl), as gendex export makes them")
	records := recordFlags(fs, "gen")
	listen := addListenFlags(fs, "")
	sp := samplingFlags(fs)
	var mixArgs stringList
	fs.Var(&mixArgs, "mix", "draw KEY per record from SPEC, VALUE:WEIGHT,... with weights summing to 1: temperature=0:0.15,1.0:0.70,u(0.2,1.0):0.15 (u: uniform in [0.2, 1.0)), enable_thinking=true:0.75,false:0.25 (the chat template's kwarg), reasoning_effort=low:0.3,high:0.7; also top_p, top_k, min_p and the penalties (repeatable, one per key). The draw hashes the dataset, the id, the sample (--samples: each its own draw) and --seed: a resume, a shard or a redo draws what a fresh run draws; a conversation is one record, one draw for all its turns and tool steps; each answer's provenance says what it drew ('gendex query mix')")
	samples := fs.Int("samples", 1, "answers per prompt, each its own request (sampled, so give a --temperature above 0 or a --mix): each answer line carries the prompt's id and its \"sample\" (0 to N-1), each (id, sample) answered exactly once through kills and resumes; a resume gives the same N; with --seed S, sample s is sent seed S+s")
	simCfg := simFlags(fs, "sim-")
	paths, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usagef("gen: give at least one ROOT or DATASET_DIR holding prompts*.jsonl")
	}
	if len(servers) == 0 {
		return usagef("gen: give at least one --server URL (or --server sim for a dry run)")
	}
	if *concurrency < 0 {
		return usagef("gen: --concurrency %d: want a number of requests, or leave it out to keep each server at its capacity", *concurrency)
	}
	if *stallAfter <= 0 {
		return usagef("gen: --stall-after %s: want a positive duration such as 10m", *stallAfter)
	}
	for _, s := range servers {
		if err := checkServerURL(s); err != nil {
			return err
		}
	}
	cfg := gen.Config{
		API: client.API(*api), Concurrency: *concurrency, Out: *out, WaitReady: *waitReady,
		RetryErrors: *retryErrors, AllowMixed: *allowMixed, Turns: *turns, APIKey: *apiKey, Model: *model, Grace: *grace, DownLimit: downLimitOf(*downLimit), MaxAttempts: *maxAttempts,
		MaxCrashes: *maxCrashes, RequestTimeout: *requestTimeout, StallAfter: *stallAfter, Command: commandLine(os.Args),
		ToolCallParser: *toolParser, Sampling: *sp, Log: c.env.Stderr, Terminal: c.env.StderrTTY, Paths: gen.PromptPaths{ID: *idPath, Prompt: *promptPath},
	}
	if err := checkPromptPaths(*idPath, *promptPath, *exportFormat); err != nil {
		return err
	}
	switch cfg.API {
	case client.APIAuto, client.APIGenerate, client.APIChat, client.APICompletions:
	default:
		return usagef("gen: --api %q: want auto, generate, chat or completions", *api)
	}
	if cfg.Turns != gen.TurnsAll && cfg.Turns != gen.TurnsLast {
		return usagef("gen: --turns %q: want all or last", *turns)
	}
	switch {
	case *scrapeEvery < 0:
		return usagef("gen: --scrape-every %s: want a duration, or 0 for never", *scrapeEvery)
	case *scrapeEvery == 0:
		cfg.ScrapeEvery = -1
	default:
		cfg.ScrapeEvery = *scrapeEvery
	}
	genTestHooks(c.env, &cfg)
	if err := genExport(c, fs, records, *exportFormat, &cfg); err != nil {
		return err
	}
	if cfg.APIKey, err = apiKeyOf(c.env, *apiKey, *apiKeyFile); err != nil {
		return err
	}
	if err := cfg.Sampling.Validate(); err != nil {
		return usagef("gen: %v", err)
	}
	if cfg.Mix, err = gen.ParseMix(mixArgs, func(name string) bool { return flagGiven(fs, name) }); err != nil {
		return usagef("gen: %v", err)
	}
	if *samples < 1 || *samples > store.MaxSamples {
		return usagef("gen: --samples %d: want 1 to %d answers per prompt", *samples, store.MaxSamples)
	}
	cfg.Samples = *samples
	if cfg.Shard, err = store.ParseShard(*shardFlag); err != nil {
		return usagef("gen: --shard: %v", err)
	}
	if *redo != "" {
		if cfg.Redo, err = gen.ParseRedo(*redo); err != nil {
			return usagef("gen: %v", err)
		}
	}
	sets, err := gen.FindShardDatasets(paths, *out, cfg.Shard)
	if err != nil {
		return err
	}
	stopSims, err := genServers(ctx, c, fs, servers, simCfg, &cfg)
	if err != nil {
		return err
	}
	defer stopSims()
	return runGenOn(ctx, c, fs, cfg, sets, listen)
}

// genServers sets cfg's servers from the --server flags, starting the
// built-in simulator for --server sim; the function it returns stops what
// it started.
func genServers(ctx context.Context, c *call, fs *flag.FlagSet, servers stringList, simCfg *sim.Config, cfg *gen.Config) (func(), error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	sims := 0
	for _, s := range servers {
		if s == "sim" {
			sims++
		}
	}
	if sims > 0 && sims < len(servers) {
		return nil, usagef("gen: --server sim with other servers: the simulator's answers never go beside a real model's; give the dry run its own run (and --out)")
	}
	cfg.Simulator = sims > 0
	for _, s := range servers {
		if s != "sim" {
			cfg.Servers = append(cfg.Servers, s)
			continue
		}
		if !flagGiven(fs, "sim-metrics") {
			simCfg.EnableMetrics = true // the built-in simulator's view is there by default
		}
		url, stop, err := startSim(ctx, *simCfg)
		if err != nil {
			stopAll()
			return nil, err
		}
		stops = append(stops, stop)
		fmt.Fprintf(messages(c.env), "gen: --server sim: %s built in, at %s (deterministic answers; no GPU)\n", simFlavorName(simCfg.Flavor), url)
		cfg.Servers = append(cfg.Servers, url)
	}
	return stopAll, nil
}

// runGenOn runs gen of cfg over sets, with the index open and its live
// view served, and says what it left.
// genExport sets cfg.Export from --export FORMAT (none when ""), and says
// once when answers cut at the default --max-new-tokens make no records.
func genExport(c *call, fs *flag.FlagSet, records func(string) (export.Config, error), format string, cfg *gen.Config) error {
	if format == "" {
		return nil
	}
	x, err := records(format)
	if err != nil {
		return err
	}
	x.Now = c.env.Now
	cfg.Export = &x
	if !flagGiven(fs, "max-new-tokens") {
		cut := "excluded as length (raise it for training data, or --include-truncated)"
		if x.IncludeTruncated {
			cut = "kept, cut, in the records (--include-truncated; raise it for whole answers)"
		}
		fmt.Fprintf(messages(c.env), "gen: --max-new-tokens is the default %d; answers cut there are %s\n", *cfg.Sampling.MaxNewTokens, cut)
	}
	return nil
}

func runGenOn(ctx context.Context, c *call, fs *flag.FlagSet, cfg gen.Config, sets []gen.Dataset, listen listenFlags) error {
	db, err := store.Open(c.db, store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	var metrics atomic.Pointer[func(*prom.Writer)]
	cfg.OnMetrics = func(f func(*prom.Writer)) { metrics.Store(&f) }
	var quitNow atomic.Pointer[func()]
	cfg.OnQuit = func(f func()) { quitNow.Store(&f) }
	stopLive, err := listen.serve(c.env, db, func(p *prom.Writer) {
		if f := metrics.Load(); f != nil {
			(*f)(p)
		}
	}, cfg.InFlightBound())
	if err != nil {
		return err
	}
	defer stopLive()
	// A second interrupt quits at once: what is written is fsynced and the
	// index catches up from the files on the next start.
	exitOnSecondInterrupt(ctx, c.env.Stderr, &quitNow)
	if note := cfg.GreedyNote(); note != "" {
		fmt.Fprintln(messages(c.env), note)
	}
	sum, err := gen.Run(ctx, db, cfg, sets)
	if errors.Is(err, gen.ErrRedoUsage) || errors.Is(err, gen.ErrPromptPath) {
		return usagef("gen: %v", err)
	}
	if e := (*export.ElsewhereError)(nil); errors.As(err, &e) {
		return fmt.Errorf("%w\n%s", err, recordsElsewhereAdvice(c.db, fs, e))
	}
	if err == nil && sum.ExportLeft > 0 {
		// Exit 1, as export does: a script must not take the records
		// for complete.
		fmt.Fprintf(messages(c.env), "gendex: %d answers have neither a record nor an exclusion yet (see above); gendex export makes them once that is fixed\n", sum.ExportLeft)
		return errSkipped
	}
	return err
}

// flagGiven reports whether the flag name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// apiKeyOf is the API key of --api-key (key), --api-key-file (file) or
// else $SGLANG_API_KEY; giving both flags is a usage error.
func apiKeyOf(env *Env, key, file string) (string, error) {
	switch {
	case file != "" && key != "":
		return "", usagef("gen: give --api-key or --api-key-file, not both")
	case file != "":
		return readAPIKey(file)
	case key == "":
		return env.Getenv("SGLANG_API_KEY"), nil
	}
	return key, nil
}

// readAPIKey returns the API key held in path, without its trailing
// newline.
func readAPIKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("gen: --api-key-file: %w (give a readable file holding the API key)", err)
	}
	key := strings.TrimRight(string(b), "\r\n")
	if strings.TrimSpace(key) == "" {
		return "", fmt.Errorf("gen: --api-key-file %s is empty: put the server's API key in it", path)
	}
	return key, nil
}

// samplingFlags declares the sampling flags, named as SGLang names them.
// Only the flags given are sent, except max_new_tokens, which is always
// sent (SGLang's /generate default of 128 made explicit).
func samplingFlags(fs *flag.FlagSet) *client.SamplingParams {
	sp := &client.SamplingParams{}
	maxNew := 128
	sp.MaxNewTokens = &maxNew
	intFlag := func(name, usage string, dst **int) {
		fs.Func(name, usage, func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("want an integer")
			}
			*dst = &n
			return nil
		})
	}
	floatFlag := func(name, usage string, dst **float64) {
		fs.Func(name, usage, func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("want a number")
			}
			*dst = &f
			return nil
		})
	}
	boolFlag := func(name, usage string, dst **bool) {
		fs.BoolFunc(name, usage, func(v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false")
			}
			*dst = &b
			return nil
		})
	}
	intFlag("max-new-tokens", "tokens to generate at most (default 128; clipped so prompt + max-new-tokens stays 16 below the context length)", &sp.MaxNewTokens)
	intFlag("min-new-tokens", "tokens to generate at least (SGLang default 0)", &sp.MinNewTokens)
	floatFlag("temperature", "sampling temperature (SGLang default 1.0; 0 is greedy)", &sp.Temperature)
	floatFlag("top-p", "nucleus sampling (SGLang default 1.0)", &sp.TopP)
	intFlag("top-k", "top-k sampling (SGLang default -1: all)", &sp.TopK)
	floatFlag("min-p", "min-p sampling (SGLang default 0)", &sp.MinP)
	floatFlag("frequency-penalty", "SGLang default 0", &sp.FrequencyPenalty)
	floatFlag("presence-penalty", "SGLang default 0", &sp.PresencePenalty)
	floatFlag("repetition-penalty", "SGLang default 1.0", &sp.RepetitionPenalty)
	boolFlag("ignore-eos", "keep generating past EOS (SGLang default false)", &sp.IgnoreEOS)
	boolFlag("skip-special-tokens", "leave special tokens out of text (SGLang default true)", &sp.SkipSpecialTokens)
	boolFlag("no-stop-trim", "keep the stop string in text (SGLang default false)", &sp.NoStopTrim)
	fs.Func("stop", "stop string (repeatable)", func(v string) error { sp.Stop = append(sp.Stop, v); return nil })
	fs.Func("stop-token-ids", "comma-separated token ids that stop generation", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("want comma-separated integers")
			}
			sp.StopTokenIDs = append(sp.StopTokenIDs, n)
		}
		return nil
	})
	fs.Func("seed", "sampling_seed", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		sp.SamplingSeed = &n
		return nil
	})
	return sp
}

// recordsElsewhereAdvice says what to run when gen --export finds the
// index's records of a dataset in another folder (an export's --out): keep
// making them there with export, or give this run an index of its own.
func recordsElsewhereAdvice(db string, fs *flag.FlagSet, e *export.ElsewhereError) string {
	own := "Or give this run an index of its own (its records beside its answers):\n    gendex --db OTHER.db gen ..."
	if len(e.Elsewhere) != 1 || e.Elsewhere[0].Gone || filepath.Base(e.Elsewhere[0].Dir) != e.Dataset {
		return own
	}
	args := []string{"gendex", "--db", ingest.ShellQuote(db), "export", "--format", fs.Lookup("export").Value.String()}
	for _, name := range []string{"include-truncated", "max-len", "reasoning"} { // recordFlags'
		if flagGiven(fs, name) {
			args = append(args, "--"+name+"="+ingest.ShellQuote(fs.Lookup(name).Value.String()))
		}
	}
	args = append(args, "--out", ingest.ShellQuote(filepath.Dir(e.Elsewhere[0].Dir)), ingest.ShellQuote(filepath.Dir(e.Out)))
	return "Keep the records where they are: run gen without --export, then:\n    " + strings.Join(args, " ") + "\n" + own
}

// downLimitOf is gen.Config.DownLimit for the flag's value (0: no bound).
func downLimitOf(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// checkServerURL refuses a --server that is not an http(s) URL with a
// host, saying what was meant ("127.0.0.1:8000" is http://127.0.0.1:8000).
func checkServerURL(s string) error {
	if s == "sim" {
		return nil
	}
	u, err := url.Parse(s)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		return nil
	}
	if !strings.Contains(s, "://") {
		meant := client.RedactURL("http://" + s)
		return usagef("gen: --server %s has no scheme: did you mean --server %s?", strings.TrimPrefix(meant, "http://"), meant)
	}
	return usagef("gen: --server %s: want an http:// or https:// URL with a host, such as http://127.0.0.1:30000", client.RedactURL(s))
}

// genTestHooks sets what the whole-binary tests set through the
// environment: GENDEX_LOG_EVERY reads gen's lines off a terminal every
// fraction of a second, not every 10 s; GENDEX_REDO_UPFRONT makes a small
// --redo truncated decide as a large one does (each answer as the feeder
// reads its prompt); GENDEX_PROBE_EVERY probes a silent server every
// second or so, not every 15 s, so that a frozen one is stalled in
// seconds (gen.Config.ProbeEvery; the rule is the same).
func genTestHooks(env *Env, cfg *gen.Config) {
	if d, err := time.ParseDuration(env.Getenv("GENDEX_LOG_EVERY")); err == nil && d > 0 {
		cfg.LogEvery = d
	}
	if n, err := strconv.ParseUint(env.Getenv("GENDEX_REDO_UPFRONT"), 10, 64); err == nil && n > 0 {
		cfg.RedoUpfront = n
	}
	if d, err := time.ParseDuration(env.Getenv("GENDEX_PROBE_EVERY")); err == nil && d > 0 {
		cfg.ProbeEvery = d
	}
}
