// Package export writes training records from answers: for every raw
// answer of a dataset that has neither a tokenized record nor an
// exclusion in the index, one line in <dataset>/tokenized.jsonl (a
// SpecForge conversation, or EAGLE's input_ids + loss_mask) or one line in
// <dataset>/excluded.jsonl saying why not ({"id", "reason", "detail",
// "excluded_at"}), both indexed through ingest.Indexer as the tokenized
// and excluded stages.
//
// The work list comes from the index (store.View.Missing), never from a
// scan of the files: each answer line, and its prompt line when it is
// needed, is read at its stored offset, its CRC checked, in chunks sorted
// by file and offset. Exactly once: before deciding anything every stage
// file of the dataset is indexed to its end and a torn last line of an
// output is cut; records are written in one write and fsync every 8 MiB
// (exclusions with them once they are 2 MiB, and at the end), then
// indexed from the bytes written. So whatever the moment of a crash, the
// next run leaves one record or one exclusion per answer.
//
// Answers that cannot be decided yet are left, not excluded: a prompt not
// in the index, or, for the ids format, prompt ids that only a server's
// tokenizer can give (Config.Tokenizer).
package export
