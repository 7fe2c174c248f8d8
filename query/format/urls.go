package format

import (
	"net/url"
	"strings"
)

// ShortURLs rewrites the server URLs in column j of rows in the shortest
// form that tells them apart: the scheme left out when every one has the
// same, the host too ("host:port" becomes ":port") when two or more share
// one host and each has a port. It returns a line that says what was left
// out ("servers: http://127.0.0.1:PORT"), or "" when nothing was. A cell
// that is not an http(s) URL with a host is left as it is, and so are all
// cells when any such URL differs in its path.
func ShortURLs(rows [][]string, j int) string {
	type parsed struct {
		scheme, host, port, rest string
	}
	var urls []parsed
	distinct := map[string]bool{}
	for _, row := range rows {
		u, err := url.Parse(row[j])
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue
		}
		urls = append(urls, parsed{u.Scheme, u.Hostname(), u.Port(), strings.TrimPrefix(row[j], u.Scheme+"://"+u.Host)})
		distinct[row[j]] = true
	}
	if len(urls) == 0 {
		return ""
	}
	sameScheme, sameHost, ports := true, true, true
	for _, u := range urls {
		sameScheme = sameScheme && u.scheme == urls[0].scheme
		sameHost = sameHost && u.host == urls[0].host
		ports = ports && u.port != ""
	}
	if !sameScheme {
		return ""
	}
	dropHost := sameHost && ports && len(distinct) > 1
	for _, row := range rows {
		u, err := url.Parse(row[j])
		if err != nil || u.Scheme != urls[0].scheme || u.Host == "" {
			continue
		}
		short := strings.TrimPrefix(row[j], u.Scheme+"://")
		if dropHost {
			short = strings.TrimPrefix(short, u.Hostname())
		}
		row[j] = short
	}
	if dropHost {
		return "servers: " + urls[0].scheme + "://" + hostOf(urls[0].host) + ":PORT"
	}
	return ""
}

// hostOf writes a host as a URL does (an IPv6 address in brackets).
func hostOf(h string) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]"
	}
	return h
}
