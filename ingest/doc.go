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
// Subpackages: sglang (the HTTP client), sim (an SGLang simulator), gen (the
// generation runner).
package ingest
