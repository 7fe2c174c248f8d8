package ingest

// What a key's name says its value is, by the words in it: the rules for
// a line of a shape not seen before read a field by what its name says
// (an answer, an input, an error, a count of the prompt's or the answer's
// tokens), never by the tool that wrote it. A name's words are split at
// '_', '-', '.', a digit and a lower-to-upper case change
// ("num_generated_tokens", "outputTokenCount", "text_output").

// nameWords is the set of the kinds of word a name holds.
type nameWords uint16

const (
	wInput   nameWords = 1 << iota // input, prompt, request, query, question, instruction
	wOutput                        // output, response, completion, generation, generated, answer, result, ...
	wToken                         // token, tokens
	wCount                         // num, n, number, count, of, used: a count name may hold them
	wError                         // error, errors, failure, exception
	wUsage                         // usage, statistics, stats, metrics: an object of counts
	wSetting                       // params, parameters, config, settings, sampling, options: what was asked for
	wNeutral                       // text, message, content, raw, final, model, inference, ...: said of an answer
	wOther                         // any other word
)

// wordKinds maps a lower-case word to its kind.
var wordKinds = map[string]nameWords{
	"input": wInput, "inputs": wInput, "prompt": wInput, "prompts": wInput, "request": wInput, "query": wInput,
	"question": wInput, "instruction": wInput, "document": wInput, "context": wInput,
	"output": wOutput, "outputs": wOutput, "response": wOutput, "responses": wOutput, "completion": wOutput,
	"completions": wOutput, "generation": wOutput, "generations": wOutput, "generated": wOutput,
	"answer": wOutput, "reply": wOutput, "prediction": wOutput, "predictions": wOutput, "result": wOutput,
	"results": wOutput, "resp": wOutput, "resps": wOutput,
	"token": wToken, "tokens": wToken,
	"num": wCount, "n": wCount, "number": wCount, "count": wCount, "of": wCount, "used": wCount,
	"error": wError, "errors": wError, "failure": wError, "exception": wError,
	"usage": wUsage, "statistics": wUsage, "stats": wUsage, "metrics": wUsage,
	"params": wSetting, "parameters": wSetting, "config": wSetting, "settings": wSetting, "sampling": wSetting,
	"options": wSetting,
	"text":    wNeutral, "message": wNeutral, "content": wNeutral, "raw": wNeutral, "final": wNeutral,
	"full": wNeutral, "llm": wNeutral, "assistant": wNeutral, "model": wNeutral, "str": wNeutral,
	"inference": wNeutral,
}

// wordsOf is the set of the kinds of word in key.
func wordsOf(key []byte) nameWords {
	var set nameWords
	var buf [24]byte
	n := 0
	flush := func() {
		if n == 0 {
			return
		}
		if n > len(buf) {
			set |= wOther
		} else if k, ok := wordKinds[string(buf[:n])]; ok {
			set |= k
		} else {
			set |= wOther
		}
		n = 0
	}
	for i, c := range key {
		switch {
		case c >= 'A' && c <= 'Z':
			if i > 0 && key[i-1] >= 'a' && key[i-1] <= 'z' {
				flush()
			}
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z':
		default: // '_', '-', '.', a digit, anything else: a break
			flush()
			continue
		}
		if n < len(buf) {
			buf[n] = c
		}
		n++
	}
	flush()
	return set
}

// countFamily says what a count's name counts: the prompt's tokens
// (input, prompt), the answer's (output, completion, generated,
// generation), or neither (0). A count name has a token word, one of
// the two families and no word but those, the count words and the
// neutral ones
// ("num_input_tokens", "output_token_count", "generated_tokens"); a word
// of any other kind makes it some other count (total_tokens,
// max_new_tokens, cached_tokens). In an object of counts (usage:
// true; "token_usage", "statistics"), the bare family word is one too
// ("input", "output").
func countFamily(w nameWords, usage bool) nameWords {
	fam := w & (wInput | wOutput)
	if fam != wInput && fam != wOutput || w&^(wInput|wOutput|wToken|wCount|wNeutral) != 0 {
		return 0
	}
	if w&wToken == 0 && !usage {
		return 0
	}
	return fam
}

// isAnswerName says the name is of an answer: an answer word, with no
// input, token, error or other word beside it ("text_output",
// "generated_text", "response_message", "generation", "modelOutput").
func isAnswerName(w nameWords) bool {
	return w&wOutput != 0 && w&^(wOutput|wNeutral) == 0
}

// isErrorName says the name is of an error: an error word, with no
// input, token or count word beside it ("error", "errors",
// "response_errors", "errorMessage").
func isErrorName(w nameWords) bool {
	return w&wError != 0 && w&(wInput|wToken|wCount) == 0
}

// lifecycle is the kind of a request's state a status word names:
// failed (the request ended without its answer), pending (not ended),
// done (ended), or none (0: not a lifecycle word).
type lifecycle uint8

const (
	lifeNone lifecycle = iota
	lifeFailed
	lifePending
	lifeDone
)

var lifecycles = map[string]lifecycle{
	"failed": lifeFailed, "failure": lifeFailed, "canceled": lifeFailed, "cancelled": lifeFailed,
	"expired": lifeFailed, "error": lifeFailed, "errored": lifeFailed, "timeout": lifeFailed,
	"timed_out": lifeFailed, "aborted": lifeFailed, "rejected": lifeFailed,
	"queued": lifePending, "pending": lifePending, "in_progress": lifePending, "running": lifePending,
	"processing": lifePending, "starting": lifePending, "started": lifePending, "validating": lifePending,
	"finalizing": lifePending, "cancelling": lifePending, "canceling": lifePending,
	"succeeded": lifeDone, "success": lifeDone, "successful": lifeDone, "completed": lifeDone,
}

// lifecycleOf is the kind of the status word s (any case).
func lifecycleOf(s string) lifecycle {
	if l, ok := lifecycles[s]; ok {
		return l
	}
	var buf [16]byte
	if len(s) > len(buf) {
		return lifeNone
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return lifecycles[string(buf[:len(s)])]
}
