package store

import (
	"encoding/json"

	bolt "go.etcd.io/bbolt"
)

// readSummary decodes a dataset's stored counters val (of its bucket b)
// into s. A summary written before Overlap.Failed has no such key: its
// count is made from the records (failedCounted), and kept by the next
// transaction that writes the dataset.
func readSummary(b *bolt.Bucket, val []byte, s *Summary) error {
	if err := json.Unmarshal(val, s); err != nil {
		return err
	}
	var has struct {
		Overlap struct {
			Failed *uint64 `json:"failed"`
		} `json:"overlap"`
	}
	if err := json.Unmarshal(val, &has); err != nil {
		return err
	}
	if has.Overlap.Failed == nil {
		s.Overlap.Failed = failedCounted(b, s.Overlap.ErrorsOpen)
	}
	return nil
}

// failedCounted counts the prompts of dataset bucket b with a final error
// and no answer, one look-up per error: none when no error is open.
func failedCounted(b *bolt.Bucket, errorsOpen uint64) uint64 {
	errs, raw, prompts := b.Bucket(stageBuckets[Errors]), b.Bucket(stageBuckets[Raw]), b.Bucket(stageBuckets[Prompts])
	if errorsOpen == 0 || errs == nil || prompts == nil {
		return 0
	}
	var n uint64
	errs.ForEach(func(id, _ []byte) error {
		if prompts.Get(unitPrompt(id)) != nil && (raw == nil || raw.Get(id) == nil) {
			n++
		}
		return nil
	})
	return n
}
