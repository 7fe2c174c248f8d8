package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// What happened to a run and its servers, as gen saw it:
//
//	events/                    unix ms (big-endian uint64) | sequence (big-endian uint64) -> Event (JSON)
//
// Keys sort by time, then by the order they were stored. The bucket is
// created by the first event, so an older file has none (no events).
var bucketEvents = []byte("events")

// Event is one thing that happened: gen started, stopped or was
// interrupted; a server went down, came back, restarted; prompts failed
// for good.
type Event struct {
	Time   int64  `json:"-"`                // Unix ms
	Server string `json:"server,omitempty"` // "" for the run's own events
	Name   string `json:"event"`
	Detail string `json:"detail,omitempty"`
}

// AddEvent stores e.
func (tx *Tx) AddEvent(e *Event) error {
	if e.Name == "" {
		return fmt.Errorf("event without a name")
	}
	b, err := tx.btx.CreateBucketIfNotExists(bucketEvents)
	if err != nil {
		return err
	}
	b.FillPercent = 0.9
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	v, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return b.Put(binary.BigEndian.AppendUint64(u64key(uint64(max(e.Time, 0))), seq), v)
}

// Events calls fn, in time order, with every event at or after Unix ms
// from.
func (v *View) Events(from int64, fn func(e *Event) error) error {
	b := v.btx.Bucket(bucketEvents)
	if b == nil {
		return nil
	}
	c := b.Cursor()
	for k, val := c.Seek(u64key(uint64(max(from, 0)))); k != nil; k, val = c.Next() {
		if len(k) != 16 {
			continue
		}
		var e Event
		if err := json.Unmarshal(val, &e); err != nil {
			return fmt.Errorf("event at %d: %w", binary.BigEndian.Uint64(k), err)
		}
		e.Time = int64(binary.BigEndian.Uint64(k))
		if err := fn(&e); err != nil {
			return err
		}
	}
	return nil
}
