package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
)

// ---- output ----

// cell renders a JSON value for a table cell.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// printRows prints objects restricted to cols: an aligned table with a
// header line, or a JSON array of objects with those keys.
func (c *cli) printRows(cols []string, rows []map[string]any) error {
	if c.formatter == "json" {
		out := make([]map[string]any, 0, len(rows))
		for _, r := range rows {
			o := make(map[string]any, len(cols))
			for _, k := range cols {
				o[k] = r[k]
			}
			out = append(out, o)
		}
		return c.printJSON(out)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for _, r := range rows {
		cells := make([]string, len(cols))
		for i, k := range cols {
			cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(cell(r[k]))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (c *cli) list(path string) ([]map[string]any, error) {
	var rows []map[string]any
	if err := c.client.getJSON(path, &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

func (c *cli) listSimple(args []string, path string, cols []string) error {
	if len(args) > 0 {
		cols = args
	}
	rows, err := c.list(path)
	if err != nil {
		return err
	}
	return c.printRows(cols, rows)
}

// ---- rabbitmqctl commands ----

func (c *cli) setPolicy(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("%w: set_policy takes NAME PATTERN DEFINITION, got %d arguments", errUsage, len(args))
	}
	name, pattern, def := args[0], args[1], args[2]
	var definition map[string]any
	dec := json.NewDecoder(strings.NewReader(def))
	dec.UseNumber()
	if err := dec.Decode(&definition); err != nil || definition == nil {
		return fmt.Errorf("policy definition %q is not a JSON object", def)
	}
	switch c.applyTo {
	case "queues", "exchanges", "all", "classic_queues", "quorum_queues", "streams":
	default:
		return fmt.Errorf("%w: --apply-to %q (queues, exchanges, all, classic_queues, quorum_queues)", errUsage, c.applyTo)
	}
	c.info("Setting policy %q for pattern %q to %q with priority \"%d\" for vhost %q ...", name, pattern, def, c.priority, c.vhost)
	_, err := c.client.do(http.MethodPut, "/api/policies/"+esc(c.vhost)+"/"+esc(name), map[string]any{
		"pattern": pattern, "definition": definition, "priority": c.priority, "apply-to": c.applyTo,
	})
	return err
}

func (c *cli) clearPolicy(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: clear_policy takes NAME", errUsage)
	}
	c.info("Clearing policy %q on vhost %q ...", args[0], c.vhost)
	_, err := c.client.do(http.MethodDelete, "/api/policies/"+esc(c.vhost)+"/"+esc(args[0]), nil)
	return err
}

func (c *cli) listPolicies(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: list_policies takes no arguments", errUsage)
	}
	c.info("Listing policies for vhost %q ...", c.vhost)
	return c.listSimple(nil, "/api/policies/"+esc(c.vhost), []string{"vhost", "name", "pattern", "apply-to", "definition", "priority"})
}

func (c *cli) listQueues(args []string) error {
	c.info("Listing queues for vhost %s ...", c.vhost)
	return c.listSimple(args, "/api/queues/"+esc(c.vhost), []string{"name", "type", "messages", "consumers", "dead_letter_exchange"})
}

func (c *cli) listExchanges(args []string) error {
	c.info("Listing exchanges for vhost %s ...", c.vhost)
	rows, err := c.list("/api/exchanges/" + esc(c.vhost))
	if err != nil {
		return err
	}
	cols := []string{"name", "type"}
	if len(args) > 0 {
		cols = args
	}
	return c.printRows(cols, rows)
}

func (c *cli) listBindings(args []string) error {
	c.info("Listing bindings for vhost %s...", c.vhost)
	rows, err := c.list("/api/bindings/" + esc(c.vhost))
	if err != nil {
		return err
	}
	for _, r := range rows {
		r["source_name"], r["source_kind"] = r["source"], "exchange"
		r["destination_name"], r["destination_kind"] = r["destination"], r["destination_type"]
	}
	cols := []string{"source_name", "source_kind", "destination_name", "destination_kind", "routing_key", "arguments"}
	if len(args) > 0 {
		cols = args
	}
	return c.printRows(cols, rows)
}

func (c *cli) purgeQueue(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: purge_queue takes NAME", errUsage)
	}
	c.info("Purging queue '%s' in vhost '%s' ...", args[0], c.vhost)
	_, err := c.client.do(http.MethodDelete, "/api/queues/"+esc(c.vhost)+"/"+esc(args[0])+"/contents", nil)
	return err
}

func (c *cli) exportDefinitions(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: export_definitions takes FILE or -", errUsage)
	}
	b, err := c.client.do(http.MethodGet, "/api/definitions", nil)
	if err != nil {
		return err
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, b, "", "  ") == nil {
		pretty.WriteByte('\n')
		b = pretty.Bytes()
	}
	if args[0] == "-" {
		_, err = c.stdout.Write(b)
		return err
	}
	c.info("Exporting definitions in JSON to a file at %q ...", args[0])
	return os.WriteFile(args[0], b, 0o600)
}

func (c *cli) importDefinitions(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: import_definitions takes FILE or -", errUsage)
	}
	var b []byte
	var err error
	if args[0] == "-" {
		b, err = io.ReadAll(c.stdin)
	} else {
		b, err = os.ReadFile(args[0])
	}
	if err != nil {
		return err
	}
	if !json.Valid(b) {
		return fmt.Errorf("%s is not valid JSON", args[0])
	}
	c.info("Importing definitions in JSON from a file at %q ...", args[0])
	_, err = c.client.do(http.MethodPost, "/api/definitions", b)
	return err
}

// ---- rabbitmqadmin commands ----

// kv parses rabbitmqadmin's key=value arguments, allowing only known keys.
func kv(args []string, known ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("%w: argument %q is not key=value", errUsage, a)
		}
		found := false
		for _, n := range known {
			found = found || n == k
		}
		if !found {
			return nil, fmt.Errorf("%w: unknown argument %q (allowed: %s)", errUsage, k, strings.Join(known, ", "))
		}
		out[k] = v
	}
	return out, nil
}

func need(m map[string]string, keys ...string) error {
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("%w: mandatory argument %q missing", errUsage, k)
		}
	}
	return nil
}

func boolArg(m map[string]string, k string, def bool) (bool, error) {
	v, ok := m[k]
	if !ok {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s=%q is not true or false", errUsage, k, v)
	}
	return b, nil
}

func jsonArgs(m map[string]string) (map[string]any, error) {
	out := map[string]any{}
	if s, ok := m["arguments"]; ok && s != "" {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&out); err != nil || out == nil {
			return nil, fmt.Errorf("%w: arguments=%q is not a JSON object", errUsage, s)
		}
	}
	return out, nil
}

func (c *cli) declare(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: declare queue|exchange|binding", errUsage)
	}
	switch args[0] {
	case "queue":
		m, err := kv(args[1:], "name", "durable", "auto_delete", "queue_type", "arguments", "node")
		if err != nil {
			return err
		}
		if err := need(m, "name"); err != nil {
			return err
		}
		durable, err := boolArg(m, "durable", true)
		if err != nil {
			return err
		}
		autoDelete, err := boolArg(m, "auto_delete", false)
		if err != nil {
			return err
		}
		a, err := jsonArgs(m)
		if err != nil {
			return err
		}
		if t, ok := m["queue_type"]; ok {
			a["x-queue-type"] = t
		}
		if _, err := c.client.do(http.MethodPut, "/api/queues/"+esc(c.vhost)+"/"+esc(m["name"]),
			map[string]any{"durable": durable, "auto_delete": autoDelete, "arguments": a}); err != nil {
			return err
		}
		c.info("queue declared")
		return nil
	case "exchange":
		m, err := kv(args[1:], "name", "type", "durable", "auto_delete", "internal", "arguments")
		if err != nil {
			return err
		}
		if err := need(m, "name", "type"); err != nil {
			return err
		}
		durable, err := boolArg(m, "durable", true)
		if err != nil {
			return err
		}
		autoDelete, err := boolArg(m, "auto_delete", false)
		if err != nil {
			return err
		}
		internal, err := boolArg(m, "internal", false)
		if err != nil {
			return err
		}
		a, err := jsonArgs(m)
		if err != nil {
			return err
		}
		if _, err := c.client.do(http.MethodPut, "/api/exchanges/"+esc(c.vhost)+"/"+esc(m["name"]), map[string]any{
			"type": m["type"], "durable": durable, "auto_delete": autoDelete, "internal": internal, "arguments": a,
		}); err != nil {
			return err
		}
		c.info("exchange declared")
		return nil
	case "binding":
		m, err := kv(args[1:], "source", "destination", "destination_type", "routing_key", "arguments")
		if err != nil {
			return err
		}
		if err := need(m, "source", "destination"); err != nil {
			return err
		}
		kind, err := destKind(m)
		if err != nil {
			return err
		}
		a, err := jsonArgs(m)
		if err != nil {
			return err
		}
		if _, err := c.client.do(http.MethodPost, "/api/bindings/"+esc(c.vhost)+"/e/"+esc(m["source"])+"/"+kind+"/"+esc(m["destination"]),
			map[string]any{"routing_key": m["routing_key"], "arguments": a}); err != nil {
			return err
		}
		c.info("binding declared")
		return nil
	}
	return fmt.Errorf("%w: declare %q (queue, exchange or binding)", errUsage, args[0])
}

func destKind(m map[string]string) (string, error) {
	switch m["destination_type"] {
	case "", "queue":
		return "q", nil
	case "exchange":
		return "e", nil
	}
	return "", fmt.Errorf("%w: destination_type %q (queue or exchange)", errUsage, m["destination_type"])
}

func (c *cli) delete(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: delete queue|exchange|binding", errUsage)
	}
	switch args[0] {
	case "queue", "exchange":
		m, err := kv(args[1:], "name")
		if err != nil {
			return err
		}
		if err := need(m, "name"); err != nil {
			return err
		}
		if _, err := c.client.do(http.MethodDelete, "/api/"+args[0]+"s/"+esc(c.vhost)+"/"+esc(m["name"]), nil); err != nil {
			return err
		}
		c.info("%s deleted", args[0])
		return nil
	case "binding":
		m, err := kv(args[1:], "source", "destination", "destination_type", "properties_key", "routing_key")
		if err != nil {
			return err
		}
		if err := need(m, "source", "destination"); err != nil {
			return err
		}
		kind, err := destKind(m)
		if err != nil {
			return err
		}
		props, ok := m["properties_key"]
		if !ok {
			props = "~"
			if rk := m["routing_key"]; rk != "" {
				props = esc(rk)
			}
		}
		if _, err := c.client.do(http.MethodDelete, "/api/bindings/"+esc(c.vhost)+"/e/"+esc(m["source"])+"/"+kind+"/"+
			esc(m["destination"])+"/"+props, nil); err != nil {
			return err
		}
		c.info("binding deleted")
		return nil
	}
	return fmt.Errorf("%w: delete %q (queue, exchange or binding)", errUsage, args[0])
}

// get peeks at messages (ack_requeue_true): nothing about them changes.
func (c *cli) get(args []string) error {
	m, err := kv(args, "queue", "count", "encoding", "truncate")
	if err != nil {
		return err
	}
	if err := need(m, "queue"); err != nil {
		return err
	}
	count := 1
	if s, ok := m["count"]; ok {
		if count, err = strconv.Atoi(s); err != nil || count < 0 {
			return fmt.Errorf("%w: count=%q is not a non-negative integer", errUsage, s)
		}
	}
	body := map[string]any{"count": count, "ackmode": "ack_requeue_true", "encoding": "auto"}
	if e, ok := m["encoding"]; ok {
		body["encoding"] = e
	}
	if t, ok := m["truncate"]; ok {
		n, err := strconv.Atoi(t)
		if err != nil {
			return fmt.Errorf("%w: truncate=%q is not an integer", errUsage, t)
		}
		body["truncate"] = n
	}
	b, err := c.client.do(http.MethodPost, "/api/queues/"+esc(c.vhost)+"/"+esc(m["queue"])+"/get", body)
	if err != nil {
		return err
	}
	var rows []map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&rows); err != nil {
		return fmt.Errorf("unexpected answer: %w", err)
	}
	if c.formatter == "json" {
		return c.printJSON(rows)
	}
	for _, r := range rows {
		r["deaths"] = deathSummary(r["deaths"])
	}
	return c.printRows([]string{"routing_key", "exchange", "message_count", "payload", "payload_bytes",
		"payload_encoding", "redelivered", "delivery_count", "deaths"}, rows)
}

// deathSummary renders x-opt-deaths as "reason from queue xN (first .. last)".
func deathSummary(v any) string {
	list, _ := v.([]any)
	parts := make([]string, 0, len(list))
	for _, d := range list {
		e, ok := d.(map[string]any)
		if !ok {
			continue
		}
		s := fmt.Sprintf("%s from %s x%s (exchange %q, keys %s, first %s, last %s)", cell(e["reason"]), cell(e["queue"]),
			cell(e["count"]), cell(e["exchange"]), cell(e["routing_keys"]), cell(e["first_time"]), cell(e["last_time"]))
		if ttl, ok := e["ttl"]; ok {
			s += " ttl " + cell(ttl)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
