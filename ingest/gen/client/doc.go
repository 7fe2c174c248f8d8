/*
Package client is gendex's HTTP client for every server flavor: SGLang,
sgl-model-gateway, vLLM, llama.cpp's llama-server and other
OpenAI-compatible servers (Flavor names which one answers). Besides the standard library it
uses only store.Clip, to shorten server messages the way the index does.

One Client talks to one server. Every generation call sends exactly one prompt
(batches are rejected by the gateway) under a fresh request id, and returns a
flat *Result or an *Error whose Kind tells the caller whether to retry
(Transient), record the failure (Permanent), stop because no request can
succeed until the settings change (Auth: the API key; Setup: a missing
route or an unknown model) or just return (Canceled). RedactURL is the one
way to print a server URL: it hides userinfo and query credentials. The client never retries on its own; Backoff computes delays for
callers that do.

	hc := &http.Client{Transport: client.NewTransport(concurrency)}
	c := client.New("http://127.0.0.1:30000", client.Options{HTTP: hc, APIKey: key})
	if err := c.WaitReady(ctx, show); err != nil { ... }
	info, err := c.ServedModel(ctx) // info.MaxModelLen: the context length
	ids, err := c.TokenizeMessages(ctx, msgs) // errors.Is(err, client.ErrTokenizeUnsupported): use c.Chat
	res, err := c.Generate(ctx, client.GenerateRequest{InputIDs: ids, Sampling: p})
	line = res.AppendJSONL(line[:0], promptID)

Endpoints used: GET /health, GET /v1/models, POST /v1/tokenize, POST /generate,
POST /v1/chat/completions and POST /v1/completions, never streaming; and
POST /abort_request (SGLang) to stop a request the caller gave up, named by
the rid its context's Pending recorded (abort.go). The
request and response shapes follow SGLang's source, including its version
differences: output_ids and text may each be absent, /generate's
finish_reason is an object, and token counts are nested in /generate's
meta_info but flat in the OpenAI usage object.
*/
package client
