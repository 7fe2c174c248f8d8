package main

import (
	"flag"

	"gendex/ingest/export"
)

// recordFlags declares the flags that say how training records are made,
// for export and for gen --export; after parsing, the function returned
// builds the Config for a --format value (cmd names the command in usage
// errors).
func recordFlags(fs *flag.FlagSet, cmd string) func(format string) (export.Config, error) {
	includeTruncated := fs.Bool("include-truncated", false, "export answers cut off at the token limit (finish_reason length) instead of excluding them")
	maxLen := fs.Int("max-len", 0, "exclude records longer than N tokens (ids: input_ids; conversations: the last turn's prompt + completion tokens, when known); 0: no limit")
	toolStops := fs.Bool("exclude-tool-stops", false, "exclude a tool conversation gen stopped where the model departed from the data (another tool, more calls than recorded results, no call where the data called) instead of making its record, which ends with the model's own turn")
	reasoning := fs.String("reasoning", "keep", "keep or drop the answers' reasoning_content in conversations records")
	return func(format string) (export.Config, error) {
		cfg := export.Config{IncludeTruncated: *includeTruncated, MaxLen: *maxLen, ExcludeToolStops: *toolStops}
		var err error
		if cfg.Format, err = export.ParseFormat(format); err != nil {
			return cfg, usagef("%s: %v", cmd, err)
		}
		switch *reasoning {
		case "keep":
			cfg.KeepReasoning = true
		case "drop":
		default:
			return cfg, usagef("%s: --reasoning %q: want keep or drop", cmd, *reasoning)
		}
		if *maxLen < 0 {
			return cfg, usagef("%s: --max-len %d: want 0 (no limit) or more", cmd, *maxLen)
		}
		return cfg, nil
	}
}
