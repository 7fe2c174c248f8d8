package export

import (
	"context"
	"encoding/json"
	"sync"

	"gendex/ingest/gen/client"
)

// prefetchWindow is how many answers' prompts are tokenized at once, and
// prefetchConcurrency how many requests are in flight for them.
const (
	prefetchWindow      = 256
	prefetchConcurrency = 16
)

// cachedTokenizer asks the server for the prompt ids of a window of answers
// concurrently, before they are decided one by one: fetch decides the
// window once without writing anything, recording what it would ask for,
// sends those requests, and keeps the answers for the real decisions. A
// request it has no answer for goes to the server then.
type cachedTokenizer struct {
	t         Tokenizer
	ids       map[string][]int
	want      map[string]func(context.Context) ([]int, error)
	recording bool
	scratch   []byte
	// idle: the last fetch wanted nothing; direct counts the requests
	// sent one by one since (see due).
	idle   bool
	direct int
}

// due reports whether the next window should be fetched ahead: not while
// the answers need no tokenizing (their prompt ids are in the answers or
// the prompts), which would decide each of them twice for nothing.
func (c *cachedTokenizer) due() bool { return !c.idle || c.direct > 0 }

func (c *cachedTokenizer) lookup(ctx context.Context, key string, ask func(context.Context) ([]int, error)) ([]int, error) {
	if ids, ok := c.ids[key]; ok {
		return ids, nil
	}
	if c.recording {
		c.want[key] = ask
		return nil, nil
	}
	c.direct++
	return ask(ctx)
}

// TokenizeMessages is the server's, from the window's answers when it can.
func (c *cachedTokenizer) TokenizeMessages(ctx context.Context, msgs []client.Message) ([]int, error) {
	b, _ := json.Marshal(msgs)
	return c.lookup(ctx, "m"+string(b), func(ctx context.Context) ([]int, error) { return c.t.TokenizeMessages(ctx, msgs) })
}

// TokenizeText is the server's, from the window's answers when it can.
func (c *cachedTokenizer) TokenizeText(ctx context.Context, text string) ([]int, error) {
	return c.lookup(ctx, "t"+text, func(ctx context.Context) ([]int, error) { return c.t.TokenizeText(ctx, text) })
}

// fetch tokenizes, concurrently, every prompt the answers es will need.
func (c *cachedTokenizer) fetch(ctx context.Context, x *Exporter, es []entry, read reader) error {
	c.ids, c.want, c.recording = map[string][]int{}, map[string]func(context.Context) ([]int, error){}, true
	for i := range es {
		if _, _, err := x.decideEntry(ctx, &es[i], read, c.scratch[:0]); err != nil {
			c.recording = false
			return err
		}
	}
	c.recording, c.idle, c.direct = false, len(c.want) == 0, 0
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, prefetchConcurrency)
	var wg sync.WaitGroup
	for key, ask := range c.want {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ids, err := ask(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			c.ids[key] = ids
		})
	}
	wg.Wait()
	return first
}
