package console

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The import map, the one inline script, is what the Content-Security-Policy
// allows by hash, and every module it names is embedded.
func TestImportMapIsAllowedAndComplete(t *testing.T) {
	h := Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Prefix, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	page := rec.Body.String()
	csp := rec.Header().Get("Content-Security-Policy")
	require.Contains(t, csp, "'"+importMapHash([]byte(page))+"'")
	require.Equal(t, 1, strings.Count(page, "<script type=\"importmap\">"))

	_, rest, _ := strings.Cut(page, importMapOpen)
	body, _, _ := strings.Cut(rest, importMapClose)
	var m struct {
		Imports map[string]string `json:"imports"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &m))
	require.Len(t, m.Imports, 4)
	sub, err := fs.Sub(assets, "assets")
	require.NoError(t, err)
	for name, path := range m.Imports {
		_, err := fs.Stat(sub, strings.TrimPrefix(path, "./"))
		require.NoError(t, err, "module %s", name)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Prefix+strings.TrimPrefix(path, "./"), nil))
		require.Equal(t, http.StatusOK, rec.Code, path)
	}
	// Each vendored library keeps its license next to it.
	for _, lib := range []string{"preact", "htm", "dagre"} {
		_, err := fs.Stat(sub, "lib/"+lib+"/LICENSE")
		require.NoError(t, err, lib)
	}
}

// Only GET and HEAD; no directory listings.
func TestHandlerRefusals(t *testing.T) {
	h := Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Prefix, nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Prefix+"lib/", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Prefix+"nope.js", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, Prefix, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Zero(t, rec.Body.Len())
}
