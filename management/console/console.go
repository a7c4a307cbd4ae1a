// Package console is the web console for dead letters: a single-page
// application (Preact with htm, dagre for the flow graph) served by the
// management HTTP listener from assets embedded in the binary. It talks to
// the HTTP API only, with the user's own credentials, so it can see and do
// exactly what that user may over the API.
//
// The libraries are vendored minified ES modules under assets/lib (see
// update-libs.sh); nothing is fetched from elsewhere at run time, and the
// Content-Security-Policy the handler sends forbids it.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the console is served under.
const Prefix = "/console/"

// importMapOpen and importMapClose delimit the one inline script of
// index.html, the import map that resolves the libraries' bare module
// names; its hash is what the Content-Security-Policy allows.
const (
	importMapOpen  = `<script type="importmap">`
	importMapClose = `</script>`
)

// Handler serves the console's files under Prefix (index.html at Prefix
// itself). The files are public, as RabbitMQ's management UI's are: they
// hold no data, and every API call they make carries the user's credentials.
func Handler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic(err)
	}
	csp := "default-src 'none'; script-src 'self' '" + importMapHash(index) + "'; style-src 'self'; " +
		"img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.URL.Path == Prefix || r.URL.Path == Prefix+"index.html" {
			// Served directly: FileServer would redirect index.html to the
			// directory and list nothing else.
			h.Set("Content-Type", "text/html; charset=utf-8")
			if r.Method == http.MethodGet {
				_, _ = w.Write(index)
			}
			return
		}
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		files.ServeHTTP(w, r)
	})
}

// importMapHash is the CSP source expression ('sha256-...') of the import
// map in index.
func importMapHash(index []byte) string {
	_, rest, ok := bytes.Cut(index, []byte(importMapOpen))
	if !ok {
		panic("console: index.html has no import map")
	}
	body, _, ok := bytes.Cut(rest, []byte(importMapClose))
	if !ok {
		panic("console: index.html's import map is not closed")
	}
	sum := sha256.Sum256(body)
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}
