package main

import (
	"context"
	"fmt"

	"gendex/ingest"
	"gendex/store"
)

// runRelocate moves the index's files under one folder to another (the
// run's folders were moved or copied), after checking each at its new
// path; the files themselves are not touched.
func runRelocate(ctx context.Context, c *call, args []string) error {
	fs := c.flags()
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("relocate: give OLD_FOLDER and NEW_FOLDER (the folder the index read the files in, and where they are now)")
	}
	db, err := store.Open(c.db, store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := ingest.Relocate(db, pos[0], pos[1])
	if err != nil {
		return err
	}
	fmt.Fprintf(messages(c.env), "relocated %d files (%d records) from %s to %s: each was checked (its size, its first bytes and those where it was indexed to), and none is read again\n",
		len(r.Files), r.Records, r.From, r.To)
	if r.Forgotten > 0 {
		fmt.Fprintf(messages(c.env), "relocate: %d files the index had forgotten (no records) were passed over: each is read from its start when next read\n", r.Forgotten)
	}
	return nil
}
