// Package ingest brings records into the index. Every record takes the
// same path, whether `gendex ingest` reads a pipeline's files or gen has
// just written an answer: Discover finds a dataset's stage files,
// Indexer.IndexFile reads what is new in a file since the last call
// (its offset, size, inode and first bytes are kept in the index), and
// Normalize turns each line, of any of the shapes people have (gendex's flat
// line, SGLang /generate, OpenAI chat/completions, OpenAI Batch, ids only),
// into a store.Record, with a count it cannot find kept as unknown, never 0.
//
// A line is indexed whole or not at all: an unfinished last line waits for
// its newline. Problems (invalid JSON, no id, duplicates, missing counts) are
// reported with file and line, and never stop the rest of the file.
//
// Its files by step: discover.go finds the files, indexer.go reads what is
// new in one (and forgets a file that must be read again), parse.go turns
// its lines into batches of records, commit.go stores a batch in one
// transaction, normalize.go reads one line (linefields.go: the fields it
// reads; other.go: the batch APIs' and local servers' shapes; reconcile.go:
// counts that must add up to a stated total), and shapes.go is where each
// answer shape keeps its parts, for export.
//
// Subpackages: export (training records), gen (the generation runner),
// gen/client (the HTTP client of every server flavor), gen/sim (a
// simulator of SGLang, vLLM and llama.cpp). None imports a package of
// query's: what both use (the Prometheus writer, the terminal helpers) is
// under store/.
package ingest
