package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"slices"
	"strings"

	"gendex/ingest/gen/sim"
)

// runSim serves an SGLang-compatible simulator until interrupted, then
// says what it served.
func runSim(ctx context.Context, c *call, args []string) error {
	fs := c.flags()
	listen := fs.String("listen", "127.0.0.1:30000", "address to listen on")
	cfg := simFlags(fs, "")
	fs.BoolVar(&cfg.Unmarked, "unmarked", false, "leave out the simulator's mark in /v1/models, so gen takes it for a real server and its answers for real ones (for tests of what gen does with a real server; never for data)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if cfg.SpecDraftTokens == 1 || cfg.SpecDraftTokens < 0 {
		return usagef("--spec-draft-tokens %d: want 0 (off) or 2 or more (the target's token plus at least one draft)", cfg.SpecDraftTokens)
	}
	if err := checkSimFlavor(cfg.Flavor, "--flavor"); err != nil {
		return err
	}
	if err := checkSimTools(*cfg, "--"); err != nil {
		return err
	}
	if err := checkSimKnee(*cfg, "--"); err != nil {
		return err
	}
	s := sim.New(*cfg)
	eff := s.Config()
	if eff.StartupDelay > 0 {
		fmt.Fprintf(messages(c.env), "gendex sim: loading for %s (--startup-delay) before it listens on %s\n", eff.StartupDelay, *listen)
	}
	// The banner comes once the port is bound: a script that waits for it
	// never talks to whatever else holds the port.
	ln, err := s.Listen(ctx, *listen)
	if err != nil {
		return fmt.Errorf("sim: %w (another server holds the port? give --listen another)", err)
	}
	if ln != nil {
		fmt.Fprintf(messages(c.env), "gendex sim: %s on http://%s (model %s, %d slots); Ctrl-C to stop\n", simFlavorName(eff.Flavor), ln.Addr(), eff.Model, eff.Slots)
		err = s.Serve(ctx, ln)
	}
	if ctx.Err() != nil {
		st := s.Stats()
		fmt.Fprintf(messages(c.env), "gendex sim: %d requests, %d completed, %d generated tokens\n", st.Requests, st.Completed, st.GeneratedTokens)
		if eff.Knee() {
			fmt.Fprintf(messages(c.env), "gendex sim: %d preemptions, %d tokens recomputed\n", st.Preemptions, st.RecomputedTokens)
		}
		return nil
	}
	return err
}

// simFlavorName says what a flavor's simulator is, for the start line.
func simFlavorName(flavor string) string {
	switch flavor {
	case sim.FlavorVLLM:
		return "a vLLM-compatible simulator"
	case sim.FlavorLlamaCpp:
		return "a llama.cpp-compatible (llama-server) simulator"
	}
	return "an SGLang-compatible simulator"
}

// checkSimFlavor refuses a flavor the simulator does not speak; flag names
// the flag that set it.
func checkSimFlavor(flavor, flag string) error {
	if flavor == "" || slices.Contains(sim.Flavors, flavor) {
		return nil
	}
	return usagef("%s %q: want %s", flag, flavor, strings.Join(sim.Flavors, ", "))
}

// simFlags declares the simulator's settings under prefix.
func simFlags(fs *flag.FlagSet, prefix string) *sim.Config {
	cfg := &sim.Config{}
	fs.StringVar(&cfg.Flavor, prefix+"flavor", sim.FlavorSGLang, "simulator: the server it speaks as: sglang, vllm (vLLM's OpenAI server) or llamacpp (llama.cpp's llama-server): routes, answers, errors, ignored sampling fields and /metrics names of that server")
	fs.Func(prefix+"lora", "simulator: a loaded LoRA adapter's name, listed in /v1/models with max_model_len null (repeatable)", func(v string) error {
		cfg.LoRAAdapters = append(cfg.LoRAAdapters, v)
		return nil
	})
	fs.Float64Var(&cfg.ParseErrorRate, prefix+"parse-error-rate", 0, "simulator: fraction of requests answered llama.cpp's HTTP 500 \"Failed to parse input at pos 0\"")
	fs.StringVar(&cfg.Model, prefix+"model", sim.DefaultModel, "simulator: served model name")
	fs.IntVar(&cfg.ContextLength, prefix+"context", sim.DefaultContextLength, "simulator: context length")
	fs.IntVar(&cfg.Slots, prefix+"slots", sim.DefaultSlots, "simulator: requests decoding at once (--max-running-requests)")
	fs.Float64Var(&cfg.DecodeTokensPerSec, prefix+"decode-tps", 0, "simulator: decode tokens/s per request (0: instant)")
	fs.Float64Var(&cfg.PrefillTokensPerSec, prefix+"prefill-tps", 0, "simulator: prefill tokens/s per request (0: instant)")
	fs.DurationVar(&cfg.StartupDelay, prefix+"startup-delay", 0, "simulator: refuse connections this long (model loading)")
	fs.DurationVar(&cfg.Warmup, prefix+"warmup", 0, "simulator: answer 503 this long after binding (warmup)")
	fs.Float64Var(&cfg.ErrorRate, prefix+"error-rate", 0, "simulator: fraction of requests answered 500/503")
	fs.Float64Var(&cfg.ResetRate, prefix+"reset-rate", 0, "simulator: fraction of connections reset")
	fs.Float64Var(&cfg.AbortRate, prefix+"abort-rate", 0, "simulator: fraction of requests aborted (200, finish_reason abort)")
	fs.DurationVar(&cfg.DisconnectCheck, prefix+"disconnect-check", 0, "simulator: sglang: how often it looks whether a request's client left (SGLANG_REQUEST_STATE_WAIT_TIMEOUT, 4s in SGLang); until then the request runs on (0: it stops at once); /abort_request stops it at once")
	fs.IntVar(&cfg.CrashAfter, prefix+"crash-after", 0, "simulator: crash after this many answers (0: never)")
	fs.StringVar(&cfg.CrashOn, prefix+"crash-on", "", "simulator: crash when a request's prompt holds this text (a prompt that kills the server)")
	fs.Int64Var(&cfg.Seed, prefix+"seed", 0, "simulator: seed for answers and faults")
	fs.StringVar(&cfg.APIKey, prefix+"api-key", "", "simulator: require this API key")
	fs.BoolVar(&cfg.ReasoningParser, prefix+"reasoning", false, "simulator: a reasoning model (reasoning_content, reasoning_tokens)")
	fs.BoolVar(&cfg.EnableMetrics, prefix+"metrics", false, "simulator: serve /metrics")
	fs.IntVar(&cfg.SpecDraftTokens, prefix+"spec-draft-tokens", 0, "simulator: speculative decoding with N draft tokens per verify step (--speculative-num-draft-tokens; 0: off): spec fields in meta_info, sglang:spec_accept_length on /metrics")
	fs.IntVar(&cfg.MaxTotalTokens, prefix+"max-total-tokens", 0, "simulator: KV cache pool in tokens, for sglang:token_usage (0: slots × context)")
	fs.DurationVar(&cfg.StepBase, prefix+"step-base", 0, "simulator: a decode step's fixed time: with it (or --step-per-req or --kv-tokens) requests decode in batched steps of base + per-req × batch, one token each (0 and no --step-per-req: a step is 1/--decode-tps)")
	fs.DurationVar(&cfg.StepPerReq, prefix+"step-per-req", 0, "simulator: a decode step's time per request in the batch (the total tokens/s flattens at 1/this)")
	fs.IntVar(&cfg.KVTokens, prefix+"kv-tokens", 0, "simulator: a KV cache pool in tokens that bounds the batch (prompt + output so far): sglang queues past it, vllm preempts and recomputes (0: unbounded)")
	fs.BoolVar(&cfg.ToolCalls, prefix+"tool-calls", false, "simulator: a tool-calling model: given tools, it calls one of them on some turns (chosen per prompt and --seed), answers the others in text")
	fs.StringVar(&cfg.ToolCallParser, prefix+"tool-call-parser", "", "simulator: the server's --tool-call-parser (sglang: qwen25, qwen, hermes, kimi_k2; vllm: hermes, kimi_k2): chat answers parsed tool_calls; kimi_k2 makes the model write Kimi-K2's markup, the others Qwen's")
	fs.BoolVar(&cfg.EnableAutoToolChoice, prefix+"enable-auto-tool-choice", false, "simulator: vLLM's --enable-auto-tool-choice (with --tool-call-parser; without both, vLLM refuses tools with tool_choice auto)")
	fs.BoolVar(&cfg.NoJinja, prefix+"no-jinja", false, "simulator: llama-server's --no-jinja: requests with tools answered 500 \"tools param requires --jinja flag\"")
	return cfg
}

// checkSimKnee refuses knee settings whose steps would take no time (a
// loop that spins); prefix is how its flags are spelled.
func checkSimKnee(cfg sim.Config, prefix string) error {
	if cfg.StepBase < 0 || cfg.StepPerReq < 0 || cfg.KVTokens < 0 {
		return usagef("%sstep-base, %sstep-per-req and %skv-tokens cannot be negative", prefix, prefix, prefix)
	}
	if cfg.KVTokens > 0 && cfg.Flavor == sim.FlavorLlamaCpp {
		return usagef("%skv-tokens: llama.cpp gives each slot its own context, so only %sslots bounds its batch", prefix, prefix)
	}
	if cfg.KVTokens > 0 && cfg.StepBase == 0 && cfg.StepPerReq == 0 && cfg.DecodeTokensPerSec <= 0 {
		return usagef("%skv-tokens needs a step time: give %sstep-base, %sstep-per-req or %sdecode-tps", prefix, prefix, prefix, prefix)
	}
	return nil
}

// checkSimTools refuses tool settings the simulator cannot honour; prefix
// is how its flags are spelled ("--" or "--sim-").
func checkSimTools(cfg sim.Config, prefix string) error {
	flavor := cfg.Flavor
	if flavor == "" {
		flavor = sim.FlavorSGLang
	}
	if !cfg.ToolCalls {
		for _, f := range []struct {
			set  bool
			name string
		}{{cfg.ToolCallParser != "", "tool-call-parser"}, {cfg.EnableAutoToolChoice, "enable-auto-tool-choice"}, {cfg.NoJinja, "no-jinja"}} {
			if f.set {
				return usagef("%s%s needs %stool-calls (the simulated model calls tools only with it)", prefix, f.name, prefix)
			}
		}
		return nil
	}
	names := sim.SimulatedToolParsers[flavor]
	switch {
	case cfg.ToolCallParser != "" && len(names) == 0:
		return usagef("%stool-call-parser: llama.cpp takes no tool parser (its chat template decides; %sno-jinja turns tools off)", prefix, prefix)
	case cfg.ToolCallParser != "" && !slices.Contains(names, cfg.ToolCallParser):
		return usagef("%stool-call-parser %q: the %s simulator speaks %s", prefix, cfg.ToolCallParser, flavor, strings.Join(names, ", "))
	case cfg.EnableAutoToolChoice && flavor != sim.FlavorVLLM:
		return usagef("%senable-auto-tool-choice is vLLM's flag (%sflavor vllm)", prefix, prefix)
	case cfg.EnableAutoToolChoice && cfg.ToolCallParser == "":
		return usagef("%senable-auto-tool-choice needs %stool-call-parser, as vLLM does", prefix, prefix)
	case cfg.NoJinja && flavor != sim.FlavorLlamaCpp:
		return usagef("%sno-jinja is llama.cpp's flag (%sflavor llamacpp)", prefix, prefix)
	}
	return nil
}

// startSim runs a simulator on a loopback port in this process.
func startSim(ctx context.Context, cfg sim.Config) (url string, stop func(), err error) {
	if err := checkSimFlavor(cfg.Flavor, "--sim-flavor"); err != nil {
		return "", nil, err
	}
	if err := checkSimTools(cfg, "--sim-"); err != nil {
		return "", nil, err
	}
	if err := checkSimKnee(cfg, "--sim-"); err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := sim.New(cfg)
	done := make(chan struct{})
	go func() { s.Serve(sctx, ln); close(done) }()
	return "http://" + ln.Addr().String(), func() { cancel(); <-done }, nil
}
