package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/epitaph-mq/epitaph/management/dlops"
)

// peekQueue pages through a queue without acquiring anything, with the
// death-history filters: peek_queue queue=Q [position=P] [count=N] [reason=...].
func (c *cli) peekQueue(args []string) error {
	known := append([]string{"queue", "position", "count"}, dlops.FilterKeys...)
	m, err := kv(args, known...)
	if err != nil {
		return err
	}
	if err := need(m, "queue"); err != nil {
		return err
	}
	q := url.Values{}
	for k, v := range m {
		if k != "queue" {
			q.Set(k, v)
		}
	}
	path := "/api/queues/" + esc(c.vhost) + "/" + esc(m["queue"]) + "/peek"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	b, err := c.client.do(http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	var page struct {
		Depth    json.Number      `json:"depth"`
		Messages []map[string]any `json:"messages"`
		Next     json.Number      `json:"next_position"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&page); err != nil {
		return fmt.Errorf("unexpected answer: %w", err)
	}
	if c.formatter == "json" {
		var raw any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("unexpected answer: %w", err)
		}
		return c.printJSON(raw)
	}
	for _, r := range page.Messages {
		r["deaths"] = deathSummary(r["deaths"])
	}
	c.info("Queue depth %s; next page at position=%s", page.Depth, page.Next)
	return c.printRows([]string{"position", "message_id", "body", "body_encoding", "redrive_count", "deaths"}, page.Messages)
}

// redriveCols are the columns of a task in the table form.
var redriveCols = []string{"id", "vhost", "source_queue", "target", "state", "moved", "skipped", "failed", "would_move", "would_skip"}

// startRedrive is start_redrive queue=DLQ target=... [target_queue=Q]
// [rate=N] [max=N] [dry_run=true] [FILTER=VALUE...].
func (c *cli) startRedrive(args []string) error {
	known := append([]string{"queue", "target", "target_queue", "rate", "max", "dry_run"}, dlops.FilterKeys...)
	m, err := kv(args, known...)
	if err != nil {
		return err
	}
	if err := need(m, "queue", "target"); err != nil {
		return err
	}
	body := map[string]any{"vhost": c.vhost, "source_queue": m["queue"], "target": m["target"]}
	if v, ok := m["target_queue"]; ok {
		body["target_queue"] = v
	}
	for _, k := range []string{"rate", "max"} {
		if v, ok := m[k]; ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("%w: %s=%q is not a number", errUsage, k, v)
			}
			body[k] = n
		}
	}
	dry, err := boolArg(m, "dry_run", false)
	if err != nil {
		return err
	}
	body["dry_run"] = dry
	f := map[string]string{}
	for _, k := range dlops.FilterKeys {
		if v, ok := m[k]; ok {
			f[k] = v
		}
	}
	body["filter"] = f
	b, err := c.client.do(http.MethodPost, "/api/redrives", body)
	if err != nil {
		return err
	}
	return c.printTask(b)
}

func (c *cli) printTask(b []byte) error {
	var t map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&t); err != nil {
		return fmt.Errorf("unexpected answer: %w", err)
	}
	if c.formatter == "json" {
		return c.printJSON(t)
	}
	return c.printRows(redriveCols, []map[string]any{t})
}

// listRedrives is list_redrives.
func (c *cli) listRedrives(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: list_redrives takes no arguments", errUsage)
	}
	rows, err := c.list("/api/redrives")
	if err != nil {
		return err
	}
	if c.formatter == "json" {
		return c.printJSON(rows)
	}
	return c.printRows(redriveCols, rows)
}

// redriveStatus is redrive_status ID; cancelRedrive is cancel_redrive ID.
func (c *cli) redriveStatus(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: redrive_status ID", errUsage)
	}
	b, err := c.client.do(http.MethodGet, "/api/redrives/"+esc(args[0]), nil)
	if err != nil {
		return err
	}
	return c.printTask(b)
}

func (c *cli) cancelRedrive(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: cancel_redrive ID", errUsage)
	}
	b, err := c.client.do(http.MethodDelete, "/api/redrives/"+esc(args[0]), nil)
	if err != nil {
		return err
	}
	return c.printTask(b)
}

// deleteRedrive is delete_redrive ID: it removes an ended task and its
// report (a running one is refused: cancel it first).
func (c *cli) deleteRedrive(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: delete_redrive ID", errUsage)
	}
	b, err := c.client.do(http.MethodDelete, "/api/redrives/"+esc(args[0])+"/report", nil)
	if err != nil {
		return err
	}
	return c.printTask(b)
}
