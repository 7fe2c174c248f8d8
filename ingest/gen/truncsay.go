package gen

import "fmt"

// truncatedSummary says how many of the run's answers were cut at the
// token limit, and what to do; "" when none was.
func (pr *progress) truncatedSummary(sum *Summary) string {
	if sum.Truncated == 0 {
		return ""
	}
	limit := "the server's default max_new_tokens"
	if n := pr.cfg.Sampling.MaxNewTokens; n != nil {
		limit = fmt.Sprintf("%d tokens", *n)
	}
	const own = "their prompts' own max_new_tokens"
	switch n := sum.TruncatedOwnLimit; {
	case n == sum.Truncated:
		limit = own
	case n > 0:
		limit = fmt.Sprintf("the token limit, %d at %s and %d at %s", sum.Truncated-n, limit, n, own)
	}
	head := fmt.Sprintf("gen: %d of %s were cut at %s (finish_reason length)", sum.Truncated, counted(sum.Responses, "answer", "answers"), limit)
	again := "ask them again with a higher limit: gen --redo truncated --max-new-tokens N (and this run's other flags)"
	switch n := sum.TruncatedOwnLimit; {
	case n == sum.Truncated:
		again = "ask them again with a higher limit: raise max_new_tokens in their prompt lines (a prompt's own wins over --max-new-tokens), then gen --redo truncated (and this run's other flags)"
	case n > 0:
		again += ", after raising max_new_tokens in the prompt lines that set their own (it wins over --max-new-tokens)"
	}
	switch x := pr.cfg.Export; {
	case x == nil:
		return head + ": " + again + "; export keeps cut answers only with --include-truncated"
	case x.IncludeTruncated:
		return head + "; --include-truncated keeps them, cut, in the records; for whole answers, " + again
	}
	return head + ", so --export excluded them as length; " + again + ", or --include-truncated keeps them"
}

// cut tells whether an answer of j that ended with finish was cut at the
// token limit, and whether that limit was its prompt line's own.
func (j *job) cut(finish string) (truncated, ownLimit bool) {
	truncated = finish == "length"
	return truncated, truncated && j.p.Sampling.MaxNewTokens != nil
}
