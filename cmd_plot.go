package main

import (
	"context"
	"time"

	"gendex/query/live"
	"gendex/query/plot"
)

// runPlot draws a chart of the run (package plot): in the terminal, at
// its size (or --width and --height), or to an SVG file.
func runPlot(ctx context.Context, c *call, args []string) error {
	if helpAsked(args) {
		fs := c.flags()
		plot.Flags(fs)
		c.printHelp(c.env.Stdout, fs)
		return errHelp
	}
	a, err := plot.Parse(args)
	if err != nil {
		return err
	}
	asker := live.NewAsker(c.db)
	defer asker.Close()
	// The time axis is in $TZ's zone, or the system's.
	loc := time.Local
	if tz := c.env.Getenv("TZ"); tz != "" {
		if l, err := time.LoadLocation(tz); err == nil {
			loc = l
		}
	}
	return a.Run(ctx, asker, c.env.Now(), plot.Options{Out: c.env.Stdout, Location: loc})
}
