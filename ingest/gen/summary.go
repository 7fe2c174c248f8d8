package gen

import "time"

// Summary is what a run did.
type Summary struct {
	Responses, Errors int64
	// Turns counts the earlier turns of conversations answered and written
	// to turns.jsonl (a conversation is one of Responses, with its last
	// turn).
	Turns int64
	// Tokens sums the completion tokens of the answers (every turn's) that
	// report them;
	// UnknownTokens counts the answers that do not (so Tokens is then a
	// lower bound).
	Tokens        int64
	UnknownTokens int64
	// Records, Excluded and ExportLeft count, under Export, the answers
	// of this run (and of earlier ones that had neither) that got a
	// record, an exclusion, or neither for now.
	Records, Excluded, ExportLeft int64
	// Truncated counts the answers among Responses cut at the token limit
	// (finish_reason length); TruncatedOwnLimit those of them whose prompt
	// set its own max_new_tokens, in place of the run's.
	Truncated, TruncatedOwnLimit int64
	// GivenUp counts, of an interrupted run, the requests still in flight
	// when the grace period ended: their prompts are asked again by the
	// next run. Interrupted says the run was.
	GivenUp     int64
	Interrupted bool
	Elapsed     time.Duration
	// AbortedOnServer counts the requests gen gave up (--request-timeout,
	// an interrupt past --grace, a fatal error, a retired server) that the
	// server was asked to stop (SGLang's /abort_request); ClosedOnly those
	// given up by closing their connection alone (other servers, or one
	// that refused the abort), which the server stops when it notices.
	AbortedOnServer, ClosedOnly int64
}
