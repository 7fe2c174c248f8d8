// Package web is gendex's web view of a run: the dashboard (progress,
// tokens/s, the servers, the events), a dataset's answers a page at a
// time, and one answer with its prompt and conversation, in a local
// browser page. It is a reader like the shell: every number comes from a
// question asked of an Asker (the writer over its socket while gen runs,
// else the file read-only), every page from the index's keys.
//
// Safe by construction: model output is untrusted, so every text goes
// through html/template and the Content-Security-Policy allows no inline
// script and nothing from another host; every asset is embedded; it
// serves GET only and never writes; the only file lines it reads are the
// index's own records (query show). It answers only its owner: requests
// for its own Host (package guard: a page that rebinds its name to the
// port reads nothing) with the token; every URL parameter is checked
// against what its page can mean (params.go) and none is read as a flag.
package web

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"gendex/query"
	"gendex/query/guard"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Answer is what a reader of answer lines gives the page: the text and
// reasoning of an answer line of any shape the index reads.
type Answer struct {
	Shape     string
	Text      string
	HasText   bool
	NoText    string // why there is no text, when HasText is false
	Reasoning string
}

// Options configure a Handler.
type Options struct {
	// Ask answers the page's questions.
	Ask query.Asker
	// Read reads an answer line's text (nil: answers are shown as their
	// stored lines only).
	Read func(line []byte) (Answer, error)
	// Chat reads a chat prompt line's turns as gen reads them, calls and
	// results paired (nil: a tool conversation is shown as its turns
	// are written).
	Chat func(line []byte) ([]ChatTurn, error)
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Token, when not "", must come with every request: as 'Authorization:
	// Bearer TOKEN', the cookie the page sets, or ?token= once.
	Token string
	// Hosts are the Host headers answered (the zero Hosts: localhost and
	// IP literals); a request for another gets 421 (see package guard).
	Hosts guard.Hosts
	// Index names the index shown in the page's header.
	Index string
	// Every is how often an open page asks for its live part (0: 5 s).
	Every time.Duration
	// Location is the zone the page's times are shown in (nil: UTC).
	Location *time.Location
}

type server struct {
	Options
	pages *template.Template
}

// Handler serves the web view.
func Handler(o Options) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Every <= 0 {
		o.Every = 5 * time.Second
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	s := &server{Options: o}
	s.pages = template.Must(template.ParseFS(assets, "templates/*.html"))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.withParams(nil, s.run))
	mux.HandleFunc("GET /live", s.withParams(nil, s.runLive))
	mux.HandleFunc("GET /dataset", s.withParams(params{"d": nameParam, "id": nameParam, "sample": sampleParam, "view": viewParam,
		"finish": nameParam, "stop": nameParam, "after": nameParam, "before": nameParam,
		"after_sample": sampleParam, "before_sample": sampleParam}, s.dataset))
	mux.HandleFunc("GET /answer", s.withParams(params{"d": nameParam, "id": nameParam, "sample": sampleParam, "stage": stageParam}, s.answer))
	mux.HandleFunc("GET /chart.svg", s.withParams(params{"metric": metricParam, "since": sinceParam, "w": widthParam}, s.chart))
	static, _ := fs.Sub(assets, "static")
	mux.Handle("GET /static/", s.withParams(nil, http.StripPrefix("/static/", http.FileServerFS(static)).ServeHTTP))
	return s.guard(mux)
}

// tokenCookie starts the name of the cookie that carries the token after
// ?token= has given it once (guard.CookieName).
const tokenCookie = "gendex_token"

// guard answers only requests for its own Host, GET and HEAD, with the
// token when one is set, and sets the headers that keep a page from
// running or loading anything that is not its own.
func (s *server) guard(next http.Handler) http.Handler {
	cookie := guard.CookieName(tokenCookie, s.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.Hosts.Allows(r.Host) {
			guard.Refuse(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "gendex web is read-only: GET and HEAD only", http.StatusMethodNotAllowed)
			return
		}
		if s.Token != "" {
			if t := r.URL.Query().Get("token"); t != "" && s.tokenIs(t) {
				http.SetCookie(w, &http.Cookie{Name: cookie, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
				q := r.URL.Query()
				q.Del("token")
				http.Redirect(w, r, onHost(r.URL.Path, q), http.StatusSeeOther)
				return
			}
			if !s.authorized(r, cookie) {
				h.Set("WWW-Authenticate", `Bearer realm="gendex"`)
				http.Error(w, "401 unauthorized: open the URL gendex web printed, with its ?token= (once: a cookie keeps it), "+
					"or send 'Authorization: Bearer TOKEN'; a token of an earlier gendex web is not this one's", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// onHost is the Location of path with query q, always a path on this
// host: begun by one slash, whatever the request's path began with. A
// Location of //evil.example/x (or /\evil.example, read alike by browsers)
// would send the browser to another host.
func onHost(path string, q url.Values) string {
	u := url.URL{Path: "/" + strings.TrimLeft(path, `/\`), RawQuery: q.Encode()}
	return u.RequestURI()
}

func (s *server) tokenIs(t string) bool { return guard.Same(t, s.Token) }

func (s *server) authorized(r *http.Request, cookie string) bool {
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.tokenIs(a) {
		return true
	}
	c, err := r.Cookie(cookie)
	return err == nil && s.tokenIs(c.Value)
}

// ask asks one question, given as the words of 'gendex query'.
func (s *server) ask(ctx context.Context, args ...string) (*query.Result, error) {
	return query.AskWords(ctx, s.Ask, s.Now(), args...)
}

// render writes a page, or a short error page when the template fails
// before anything was written.
func (s *server) render(w http.ResponseWriter, name string, data any) {
	var b strings.Builder
	if err := s.pages.ExecuteTemplate(&b, name, data); err != nil {
		http.Error(w, "gendex web: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprint(w, b.String())
}

// fail shows an error in the page's frame, with status code.
func (s *server) fail(w http.ResponseWriter, code int, err error) {
	w.WriteHeader(code)
	s.render(w, "error.html", map[string]any{"Page": s.page("error"), "Error": err.Error()})
}

// frame is what every page's header and footer show.
type frame struct {
	Title string
	Index string
	Now   string
	Every int // milliseconds between live updates
}

func (s *server) page(title string) frame {
	return frame{Title: title, Index: s.Index, Now: s.Now().In(s.Location).Format("2006-01-02 15:04:05 MST"), Every: int(s.Every / time.Millisecond)}
}

// link builds a page's URL from its path and its parameters, leaving out
// the empty ones.
func link(path string, kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}
