package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// client calls the management HTTP API.
type client struct {
	base     string
	user     string
	password string
	http     *http.Client
}

// apiError is an HTTP error answer.
type apiError struct {
	Status int
	Err    string `json:"error"`
	Reason string `json:"reason"`
}

func (e *apiError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("%s (HTTP %d): %s", e.Err, e.Status, e.Reason)
}

// esc percent-encodes one path segment ("/" becomes "%2F").
func esc(s string) string { return url.PathEscape(s) }

// do sends body (JSON-encoded unless it is []byte) and returns the answer's
// body; statuses >= 400 become *apiError.
func (c *client) do(method, path string, body any) ([]byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.SetBasicAuth(c.user, c.password)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the answer to %s %s: %w", method, path, err)
	}
	if err := answerError(resp.StatusCode, out); err != nil {
		return nil, err
	}
	return out, nil
}

// answerError is the *apiError of an answer with status >= 400, else nil.
func answerError(status int, body []byte) error {
	if status < 400 {
		return nil
	}
	e := &apiError{Status: status}
	_ = json.Unmarshal(body, e)
	if e.Err == "" && e.Reason == "" {
		e.Reason = strings.TrimSpace(string(body))
	}
	return e
}

// getJSON GETs path and decodes the answer into v.
func (c *client) getJSON(path string, v any) error {
	b, err := c.do(http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
