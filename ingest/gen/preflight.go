package gen

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"gendex/ingest"
	"gendex/ingest/export"
	"gendex/ingest/gen/sglang"
)

// Before a server gets its first request, and whenever it comes back,
// preflight checks that it can serve this run: the model asked for is
// listed, every route the run's prompts need exists, and its answers carry
// the output ids --export ids needs. Each route is decided per prompt shape
// once (routeFor): a token-id prompt goes to /generate (--api generate) or
// to /v1/completions with the ids as its prompt (--api chat and
// completions: OpenAI's token-array prompt, which SGLang, vLLM and
// llama.cpp read), never to the chat endpoint, which only SGLang would read
// them from. A missing route or model stops the run before anything is
// written for it.

// shape is what a prompt line holds, for routing.
type shape uint8

const (
	shapeIDs shape = iota
	shapeText
	shapeChat
	numShapes
)

func shapeOf(p *Prompt) shape {
	switch {
	case p.Messages != nil:
		return shapeChat
	case p.InputIDs != nil:
		return shapeIDs
	}
	return shapeText
}

// routeFor returns the route a prompt of shape sh takes under api on a
// server whose tokenize state is tok (-1: it cannot turn messages into
// ids, so chat prompts go to its chat endpoint).
func routeFor(api sglang.API, sh shape, tok int32) string {
	switch {
	case api == sglang.APIGenerate && (sh != shapeChat || tok >= 0):
		return "/generate"
	case sh == shapeIDs, sh == shapeText && api == sglang.APICompletions:
		return "/v1/completions"
	}
	return "/v1/chat/completions"
}

// routes keeps, per server, what each route's probe found: nil, or the
// server's answer that the route is missing.
type routes struct {
	mu      sync.Mutex
	checked map[string]*sglang.Error
}

// check probes path on c once (ProbeRoute) and returns the missing route's
// answer, or nil when it exists.
func (rt *routes) check(ctx context.Context, c *sglang.Client, path string) (*sglang.Error, error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if missing, known := rt.checked[path]; known {
		return missing, nil
	}
	missing, err := c.ProbeRoute(ctx, path)
	if err != nil {
		return nil, err // not known: asked again next time
	}
	if rt.checked == nil {
		rt.checked = map[string]*sglang.Error{}
	}
	rt.checked[path] = missing
	return missing, nil
}

// reset forgets what was found (the server came back: it may be another).
func (rt *routes) reset() {
	rt.mu.Lock()
	rt.checked = nil
	rt.mu.Unlock()
}

// preflight runs the checks above for s, whose /v1/models said info; c is
// the client the run will use for it.
func (r *run) preflight(ctx context.Context, s *server, c *sglang.Client, info sglang.ModelInfo) error {
	if m := r.cfg.Model; m != "" && !slices.Contains(info.Models, m) && info.Flavor == sglang.FlavorLlamaCpp {
		r.once("model "+s.name, "gen: %s (llama.cpp) serves %s and does not read --model %s", s.name, strings.Join(info.Models, ", "), m)
	} else if m != "" && !slices.Contains(info.Models, m) {
		return &stopError{msg: fmt.Sprintf("%s (%s) serves %s, not --model %s", s.name, info.Flavor, strings.Join(info.Models, ", "), m),
			hint: "check --model: leave it out to use the model the server serves, or name one GET /v1/models lists; no prompt was sent"}
	}
	s.routes.reset()
	api := r.cfg.API
	for sh := range numShapes {
		if !r.shapes[sh] {
			continue
		}
		if err := r.needRoute(ctx, s, c, routeFor(api, sh, s.tokenize.Load())); err != nil {
			return err
		}
	}
	if x := r.cfg.Export; x != nil && x.Format == export.IDs {
		for sh := range numShapes {
			route := routeFor(api, sh, s.tokenize.Load())
			if r.shapes[sh] && (route == "/v1/chat/completions" || route == "/v1/completions") && !info.Flavor.ReturnsOutputIDs(sglang.APICompletions) {
				return &stopError{msg: fmt.Sprintf("%s (%s) answers %s without the output token ids, so --export ids cannot make their records", s.name, info.Flavor, route),
					hint: "use --export conversations, or a server that returns ids (SGLang's /generate with --api generate, vLLM); no prompt was sent"}
			}
		}
	}
	if api != sglang.APIGenerate || r.shapes[shapeChat] && s.tokenize.Load() < 0 {
		if _, ignored := r.cfg.Sampling.FieldsFor(info.Flavor); len(ignored) > 0 {
			r.once("ignored "+s.name, "gen: %s (%s) does not read %s: not sent, its own behaviour applies", s.name, info.Flavor, strings.Join(ignored, ", "))
		}
	}
	return nil
}

// needRoute stops the run when s lacks path, which the run's prompts need:
// the error names the server, the route, its answer and what to check.
func (r *run) needRoute(ctx context.Context, s *server, c *sglang.Client, path string) error {
	missing, err := s.routes.check(ctx, c, path)
	switch {
	case err != nil && sglang.KindOf(err) == sglang.Auth:
		return r.setupError(err)
	case err != nil:
		return nil // not known now: the request itself finds out, as any request does
	case missing != nil:
		return r.setupError(missing)
	}
	return nil
}

// sampleShapes reads the first prompt of each prompts file: the shapes
// the run will send, so that preflight checks their routes before the
// first request (a shape met later is checked when it comes: sendable).
func sampleShapes(sets []*dsRun) (shapes [numShapes]bool) {
	for _, ds := range sets {
		for _, path := range ds.Prompts {
			f, err := os.Open(path)
			if err != nil {
				continue
			}
			ingest.ReadLines(io.LimitReader(f, 1<<20), func(line []byte, n int64) error {
				p, err := ParsePrompt(line, "x", n)
				if err != nil {
					return nil
				}
				shapes[shapeOf(p)] = true
				return errStop
			})
			f.Close()
		}
	}
	return shapes
}

// routeChecked returns the route p takes on s, once s is known to have
// it; a route s lacks stops the run before the request (needRoute), and
// the caller sends nothing.
func (r *run) routeChecked(ctx context.Context, s *server, c *sglang.Client, p *Prompt) (string, error) {
	route := routeFor(r.cfg.API, shapeOf(p), s.tokenize.Load())
	if err := r.needRoute(ctx, s, c, route); err != nil {
		r.abort(err)
		return "", err
	}
	return route, nil
}
