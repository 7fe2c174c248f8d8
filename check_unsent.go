package main

import (
	"gendex/ingest/gen"
	"gendex/query"
)

// check reads the prompts still to go by gen's rule of what it sends, in
// this process and in a writer's that answers the question on its socket:
// those gen does not send for their shape get a fix with --prompt.
func init() { query.PromptUnsendable = gen.Unsendable }
