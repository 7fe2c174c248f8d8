// Package gen runs generation: it streams every dataset's prompts to one or
// more SGLang (or OpenAI-compatible) servers, appends each response to
// <dataset>/raw_responses.jsonl the moment it arrives, and indexes it
// through the same path as `gendex ingest`, so that every prompt is
// answered exactly once through crashes and restarts. A multi-turn chat
// prompt is regenerated turn by turn, each turn exactly once, its earlier
// turns written to turns.jsonl (turns.go).
// Under Config.Export each answer's training record or exclusion is written
// after it, in the same flush (exportrun.go).
//
// # The parts of a run
//
// A run (gen.go) only wires its parts; each is its own type, owns one job,
// and holds the *control (control.go: the log, the two stops) and the few
// other parts it calls, never the run:
//
//	prompts files                              servers
//	      |                                     ^     |
//	      v               job          request  |     | answer
//	   feeder ----------------------> asker ----+     |
//	   (feed.go)                   (worker.go) <------+
//	      |   ^ askAgain              |   ^
//	      |   |                 talk  |   | ask: each turn or
//	      | redoChooser               v   | tool step, one request
//	      | (redo.go)            conversations
//	      |                      (turns.go, toolturns.go)
//	      |                           |
//	      | result: a final error     | result: an answer line
//	      +--------> writer <---------+ (the asker's, of a
//	                 (writer.go)          one-request prompt, too)
//	                 answer files, fsync, the index,
//	                 records under --export (exportrun.go)
//
//	monitor (scrape.go, events.go, runstate.go, stall.go, probe.go,
//	stallsay.go): the servers' /metrics, the run's events, its row,
//	stalls and the probes that find them; it reads the counts and the
//	pool and never changes them.
//	progress (progress.go): the live lines and the summary; it only reads.
//	governor (limit.go, limitrule.go): each server's limit on gen's
//	requests in flight there, which the pool's pick honours: with no
//	--concurrency, started at what the server states (SGLang's slots and
//	KV pool, vLLM's pool, llama.cpp's slots; as learn read them, and the
//	run's requests' size) and moved by the monitor's readings of its
//	/metrics (its queue, running requests, KV use, preemptions) toward its
//	capacity and a small queue; it changes the limits and nothing else.
//
// The contracts between them are job (a prompt to ask, with its recorded
// turns) and result (a line for one of the dataset's files, with its
// counts); dsRun is one dataset's state, each field written by one part.
//
// The protocol (README.md, gen, "Exactly once"): responses are buffered for
// at most FlushEvery, written to the dataset's file in one write and
// fsynced, then indexed from the file's stored offset in one transaction.
// On start, every stage file of each dataset (prompts*, raw_responses*,
// tokenized*, errors*, turns*, as ingest.Discover finds them) is indexed up
// to its end first (a crash between write and index, or shards from other
// runs),
// a torn last line of gen's own files is cut off (gen is their only
// writer), and the prompts already answered, per the index, are skipped.
// One prompt is never in flight twice (with --samples N, one unit: a
// prompt's sample; samples.go).
//
// Failures, by scope: a prompt-level error (HTTP 400 for one prompt) is
// recorded in errors.jsonl; a server-level one (refused, reset, 5xx) is
// retried, the server waited for and its /v1/models read again when it
// comes back, with a budget per prompt (Config.MaxAttempts,
// Config.MaxCrashes); a run-level one (401/403, 404/405 on the route, an
// unknown model) stops the run at once and records nothing. A request gen
// gives up (--request-timeout, an interrupt past --grace, a fatal error, a
// retired server) is stopped on the server too: its connection closed and,
// on SGLang, /abort_request by its rid (abort.go).
package gen
