// Package store is gendex's index: a bbolt file that holds, per dataset and
// stage, one record per id plus counters that are maintained in the same
// transaction as the records, so that every question the query package asks
// costs the same at ten records and at ten million.
//
// Layout of the bbolt file:
//
//	meta/                      "version" -> schema version (5; versions 1 to 4 are upgraded on open)
//	files/                     absolute path -> FileState (JSON), with its Phase
//	fileids/                   file id (big-endian uint32) -> absolute path
//	forgetting/                absolute path -> empty: files whose old records are being removed
//	reread/                    absolute path -> empty: files forgotten and not read to their end since
//	datasets/<name>/
//	    stats                  key -> dataset Summary (JSON): per-stage Stats and Overlap
//	    missfrom               key -> fingerprint | H: every prompt below H has an answer or
//	                           an error; Missing starts there (missfrom.go)
//	    prompts/ raw/ tokenized/ errors/ turns/ excluded/
//	                           id -> Record (binary, see record.go)
//	    hist/                  completion tokens (big-endian uint32) -> count, raw stage
//	    ts/                    unix second (big-endian uint64) -> records, tokens, unknown
//	    byfile/                file id (big-endian uint32) | sequence (big-endian uint64) ->
//	                           the (stage, id) pairs one transaction added from that file:
//	                           the per-file key index, one Put per file per commit
//	    spechist/              accept length in hundredths -> count, raw stage (see spec.go)
//	    spects/                unix second -> completion tokens and verify steps of spec answers
//	series/<server>/           unix second -> one sample of a server's /metrics and gen's view (series.go)
//	events/                    unix ms | sequence -> an event of a gen run (JSON; events.go)
//	runs/                      start unix ms | pid -> a run of gen or ingest --follow (JSON; runs.go)
//
// Samples (gen --samples N: N answers per prompt). The unit of
// exactly-once is a prompt's sample, (id, s): the answer stages (raw,
// errors, tokenized, excluded, and turns, whose keys are a unit's with
// "#i") are keyed by UnitID(id, s), the id itself for sample 0 and id,
// UnitSep (a NUL byte, which no id may hold) and s otherwise; the prompts
// stage stays keyed by id. So a dataset of one sample keeps every key and
// byte it had. The index learns N from the answers: each record of a line
// with "sample" s or "samples" N keeps max(N, s+1) (Record.Samples, an
// extension field) and its stage counts it (Stats.Samples, N -> records,
// only N above 1), so N is the largest count held, exact under removal,
// and a fresh ingest of the files reaches it whatever order it reads
// them in. The Overlap counters count units: a unit is "prompted" when
// its prompt id is in the prompts stage (a membership looks the prompt
// up by the unit's prompt key), and a prompt entering or leaving moves
// the counters of each of its units held in raw or errors (one cursor
// range, the units of id sort right after it). MissingRaw is prompts x N
// less Answered; Summary.Done keeps, per count k of 2 or more, how many
// prompts have k units with an outcome (moved when a unit gains or loses
// its outcome, and when a prompt comes or goes), so the prompts done with
// every sample, PromptsDone, is read for any N without a scan. Why this
// and not prompts expanded into N units in the prompt stage: N is not
// known when the prompts are read (it comes with the answers, or a later
// run), and an expansion would have to be redone, by a scan, each time N
// grew; the answers already name their unit. A sampled dataset keeps no
// missing-from hint (Missing walks from the first prompt).
//
// Forgetting a file (truncated, replaced) is a state machine whose every
// step is one transaction: Tx.ForgetFile stores the file reset (ID 0,
// Offset 0) in phase PhaseForgetting and takes its duplicates and file count
// off the counters; DB.FinishForgets removes its records through byfile, a
// bounded batch per transaction with its position saved in the FileState,
// and the last batch makes it PhaseReady.
// Files indexed by version 1 have no byfile entries (FileState.Keyed
// false): their removal scans their stages, also in bounded batches with a
// saved cursor. Nothing is rebuilt at open.
//
// A record that cannot be stored (an id over MaxIDLen, bbolt's key limit,
// since ids are stage keys as they are; see CheckRecord) is refused by
// Tx.Add with ErrUnstorable before anything changes, so the caller leaves
// that one line out and commits the rest.
//
// store is the only package that imports bbolt. One process opens the file
// read-write at a time (bbolt holds an exclusive flock); Open fails after
// Options.Timeout with ErrLocked instead of hanging.
//
// store/ is the bottom of the house: besides the index it holds the two
// leaf packages both ingest and query use, which may not import each
// other: prom (the Prometheus text writer) and terminal (a terminal's size,
// text widths, cutting and wrapping). Nothing under store/ imports a
// package of gendex's outside it.
package store
