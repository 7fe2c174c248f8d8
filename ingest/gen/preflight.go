package gen

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"gendex/ingest/export"
	"gendex/ingest/gen/client"
)

// Before a server gets its first request, and whenever it comes back,
// preflight checks that it can serve this run: the model asked for is
// listed, every route the run's prompts need exists, and its answers carry
// the output ids --export ids needs. Each route is decided per prompt shape
// once (routeFor) from the API the server is spoken to with (apiFor: --api,
// or by default the one its flavor offers): a token-id prompt goes to
// /generate (generate) or to /v1/completions with the ids as its prompt
// (chat and completions: OpenAI's token-array prompt, which SGLang, vLLM
// and llama.cpp read), never to the chat endpoint, which only SGLang would
// read them from. A missing route or model stops the run before anything
// is written for it.

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
func routeFor(api client.API, sh shape, tok int32) string {
	switch {
	case api == client.APIGenerate && (sh != shapeChat || tok >= 0):
		return "/generate"
	case sh == shapeIDs, sh == shapeText && api == client.APICompletions:
		return "/v1/completions"
	}
	return "/v1/chat/completions"
}

// apiFor is the API gen speaks to the server behind c with: --api when
// given, else the one its flavor offers (SGLang's /generate, else chat).
func (cfg *Config) apiFor(c *client.Client) client.API {
	if cfg.API != client.APIAuto {
		return cfg.API
	}
	return c.Flavor.API()
}

// shapeNames name the prompt shapes for people.
var shapeNames = [numShapes]string{shapeIDs: "token-id prompts", shapeText: "text prompts", shapeChat: "chat prompts"}

// routesText says where this run's prompts go on s, for its ready line:
// "prompts to /generate", or per shape when they differ.
func (a *asker) routesText(s *server, c *client.Client) string {
	api, tok := a.cfg.apiFor(c), s.tokenize.Load()
	var parts []string
	same := ""
	for sh := range numShapes {
		if !a.shapes[sh] {
			continue
		}
		route := routeFor(api, sh, tok)
		if len(parts) == 0 {
			same = route
		} else if route != same {
			same = ""
		}
		parts = append(parts, shapeNames[sh]+" to "+route)
	}
	how := "--api " + string(api)
	if a.cfg.API == client.APIAuto {
		how = "chosen for " + c.Flavor.String() + "; --api forces one"
	}
	switch {
	case len(parts) == 0:
		return ""
	case same != "":
		return fmt.Sprintf("; prompts to %s (%s)", same, how)
	}
	return fmt.Sprintf("; %s (%s)", strings.Join(parts, ", "), how)
}

// routes keeps, per server, what each route's probe found: nil, or the
// server's answer that the route is missing.
type routes struct {
	mu      sync.Mutex
	checked map[string]*client.Error
}

// check probes path on c once (ProbeRoute) and returns the missing route's
// answer, or nil when it exists.
func (rt *routes) check(ctx context.Context, c *client.Client, path string) (*client.Error, error) {
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
		rt.checked = map[string]*client.Error{}
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
func (a *asker) preflight(ctx context.Context, s *server, c *client.Client, info client.ModelInfo) error {
	if m := a.cfg.Model; m != "" && !slices.Contains(info.Models, m) && info.Flavor == client.FlavorLlamaCpp {
		a.ctl.once("model "+s.name, "gen: %s (llama.cpp) serves %s and does not read --model %s", s.name, strings.Join(info.Models, ", "), m)
	} else if m != "" && !slices.Contains(info.Models, m) {
		return &stopError{msg: fmt.Sprintf("%s (%s) serves %s, not --model %s", s.name, info.Flavor, strings.Join(info.Models, ", "), m),
			hint: "check --model: leave it out to use the model the server serves, or name one GET /v1/models lists; no prompt was sent"}
	}
	s.routes.reset()
	api := a.cfg.apiFor(c)
	for sh := range numShapes {
		if !a.shapes[sh] {
			continue
		}
		if err := a.needRoute(ctx, s, c, routeFor(api, sh, s.tokenize.Load())); err != nil {
			return err
		}
	}
	if x := a.cfg.Export; x != nil && x.Format == export.IDs {
		for sh := range numShapes {
			route := routeFor(api, sh, s.tokenize.Load())
			if a.shapes[sh] && (route == "/v1/chat/completions" || route == "/v1/completions") && !info.Flavor.ReturnsOutputIDs(client.APICompletions) {
				return &stopError{msg: fmt.Sprintf("%s (%s) answers %s without the output token ids, so --export ids cannot make their records", s.name, info.Flavor, route),
					hint: "use --export conversations, or a server that returns ids (SGLang's /generate with --api generate, vLLM); no prompt was sent"}
			}
		}
	}
	if err := a.preflightTools(ctx, s, c); err != nil {
		return err
	}
	if api != client.APIGenerate || a.shapes[shapeChat] && s.tokenize.Load() < 0 {
		if _, ignored := a.cfg.Sampling.FieldsFor(info.Flavor); len(ignored) > 0 {
			a.ctl.once("ignored "+s.name, "gen: %s (%s) does not read %s: not sent, its own behaviour applies", s.name, info.Flavor, strings.Join(ignored, ", "))
			for _, k := range ignored {
				a.ctl.said("ignored " + s.name + " " + k) // a prompt that sets it too is not said again (sayUnread)
			}
		}
	}
	return nil
}

// needRoute stops the run when s lacks path, which the run's prompts need:
// the error names the server, the route, its answer and what to check.
func (a *asker) needRoute(ctx context.Context, s *server, c *client.Client, path string) error {
	missing, err := s.routes.check(ctx, c, path)
	switch {
	case err != nil && client.KindOf(err) == client.Auth:
		return a.setupError(err)
	case err != nil:
		return nil // not known now: the request itself finds out, as any request does
	case missing != nil:
		return a.setupError(missing)
	}
	return nil
}

// readShapes gives each dataset its prompts files' scan (scanPrompts)
// and the route shapes its lines hold, and returns the shapes the run
// will send, so that preflight checks their routes before the first
// request.
func readShapes(sets []*dsRun, scans map[string]*promptScan) (shapes [numShapes]bool) {
	for _, ds := range sets {
		ds.scan = scans[ds.Name]
		if ds.scan == nil {
			continue
		}
		for sh := lineIDs; sh <= lineConvos; sh++ {
			if ds.scan.counts[sh] > 0 {
				ds.shapes[routeShape[sh]] = true
				shapes[routeShape[sh]] = true
			}
		}
	}
	return shapes
}

// sayIDsPrompts says, once the first server is ready and before the first
// request, which datasets of token-id prompts an --export conversations
// run makes no records for (each answer is excluded as ids_prompt: a
// conversation needs text), and the command that makes their ids records
// afterwards, or, on a server whose answers carry no output ids
// (llama.cpp), that none can be made from them.
func (a *asker) sayIDsPrompts(sets []*dsRun) {
	if x := a.cfg.Export; x == nil || x.Format != export.Conversations {
		return
	}
	var c *client.Client
	for _, s := range a.pool.servers {
		if s.up.Load() {
			c = s.client()
			break
		}
	}
	for _, ds := range sets {
		if !ds.shapes[shapeIDs] {
			continue
		}
		const head = "gen: %s: its prompts are token ids, so --export conversations makes no records of them (each answer is excluded as ids_prompt)"
		if c != nil && !c.Flavor.ReturnsOutputIDs(a.cfg.apiFor(c)) {
			a.ctl.logf(head+"; %s's answers carry no output ids, so no ids records can be made of them either (SGLang and vLLM return them)", ds.Name, c.Flavor)
			continue
		}
		a.ctl.logf(head+"; once answered, their ids records:\n    %s", ds.Name, export.IDsCommand(filepath.Dir(ds.Prompts[0]), filepath.Dir(ds.Raw)))
	}
}

// routeChecked returns the route p takes on s, once s is known to have
// it; a route s lacks stops the run before the request (needRoute), and
// the caller sends nothing.
func (a *asker) routeChecked(ctx context.Context, s *server, c *client.Client, p *Prompt) (string, error) {
	route := routeFor(a.cfg.apiFor(c), shapeOf(p), s.tokenize.Load())
	if err := a.needRoute(ctx, s, c, route); err != nil {
		a.ctl.abort(err)
		return "", err
	}
	return route, nil
}
