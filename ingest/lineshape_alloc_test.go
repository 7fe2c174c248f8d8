package ingest

import (
	"runtime"
	"testing"
	"unsafe"

	"gendex/store"
)

// bytesPerCall is the heap bytes one call of fn allocates, on average over
// runs (as testing.AllocsPerRun counts allocations, on one P).
func bytesPerCall(runs int, fn func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	fn() // a first call may fill caches
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		fn()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// TestLineScratchStaysOnStack: reading a line takes no heap for the scan's
// fields and the indexer's info, whatever the row of the table of line
// shapes that reads it (a reader called through a func value put both on
// the heap, 1.5 KB a line: ingest of output_ids-heavy lines took 16% more
// CPU than before the table, most of it the collector's). What a line
// allocates is what its record keeps (its id, its time), far less than the
// fields themselves. gen --export's ReadAnswerRecord likewise. Not
// parallel: it counts the process's allocations.
func TestLineScratchStaysOnStack(t *testing.T) {
	limit := uint64(unsafe.Sizeof(fields{}))
	for k, row := range lineShapes {
		line := []byte(row.example)
		var rec store.Record
		if n := bytesPerCall(200, func() { _, _ = Normalize(line, row.stage, &rec) }); n >= limit {
			t.Errorf("row %d (%s): Normalize allocates %d bytes a line; want under %d (the size of the scan's fields: they went to the heap)", k, row.name, n, limit)
		}
	}
	line := []byte(lineShapes[lineFlat].example)
	var rec store.Record
	if n := bytesPerCall(200, func() { _, _, _ = ReadAnswerRecord(line, nil, &rec) }); n >= limit {
		t.Errorf("ReadAnswerRecord allocates %d bytes a line of gen's; want under %d (the scan's fields went to the heap)", n, limit)
	}
}
