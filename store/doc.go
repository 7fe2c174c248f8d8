// Package store is gendex's index: a bbolt file that holds, per dataset and
// stage, one record per id plus counters that are maintained in the same
// transaction as the records, so that every question the query package asks
// costs the same at ten records and at ten million.
//
// Layout of the bbolt file:
//
//	meta/                      "version" -> schema version
//	files/                     absolute path -> FileState (JSON)
//	fileids/                   file id (big-endian uint32) -> absolute path
//	datasets/<name>/
//	    stats                  key -> dataset Summary (JSON): per-stage Stats and Overlap
//	    prompts/ raw/ tokenized/ errors/
//	                           id -> Record (binary, see record.go)
//	    hist/                  completion tokens (big-endian uint32) -> count, raw stage
//	    ts/                    unix second (big-endian uint64) -> records, tokens, unknown
//
// store is the only package that imports bbolt. One process opens the file
// read-write at a time (bbolt holds an exclusive flock); Open fails after
// Options.Timeout with ErrLocked instead of hanging.
package store
