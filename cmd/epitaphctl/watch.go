package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/epitaph-mq/epitaph/dlevents"
)

// watchDeadLetters prints the dead-letter events of the vhost (of one
// queue with --queue) as they happen, from the HTTP API's Server-Sent
// Events stream: one line per event (table), or its JSON form per line
// (json). It returns after --count events (0: never) or when the broker
// ends the stream (shutdown).
func (c *cli) watchDeadLetters(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: watch_dead_letters takes no arguments (use --queue, -p and --count)", errUsage)
	}
	q := url.Values{"vhost": {c.vhost}}
	if c.queue != "" {
		q.Set("queue", c.queue)
	}
	req, err := http.NewRequest(http.MethodGet, c.client.base+"/api/events/dead-letters?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.SetBasicAuth(c.client.user, c.client.password)
	req.Header.Set("Accept", "text/event-stream")
	// The stream has no end: no client time-out (the broker's heartbeats
	// keep the connection alive, its shutdown ends the stream).
	hc := *c.client.http
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body [4096]byte
		n, _ := resp.Body.Read(body[:])
		return answerError(resp.StatusCode, body[:n])
	}
	what := "vhost " + c.vhost
	if c.queue != "" {
		what += ", queue " + c.queue
	}
	c.info("Watching dead-letter events in %s ...", what)
	if c.formatter == "table" && !c.quiet {
		fmt.Fprintln(c.stdout, strings.Join([]string{"time", "queue", "reason", "count", "outcome", "to", "message_id"}, "\t"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	seen := 0
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue // ids, event names, heartbeats
		}
		if c.formatter == "json" {
			fmt.Fprintln(c.stdout, data)
		} else {
			p, err := dlevents.ParseJSON([]byte(data))
			if err != nil {
				return fmt.Errorf("bad event %q: %w", data, err)
			}
			fmt.Fprintln(c.stdout, eventLine(p))
		}
		if seen++; c.count > 0 && seen >= c.count {
			return nil
		}
	}
	return sc.Err()
}

// eventLine is one event (or gap) as a table row.
func eventLine(p dlevents.Parsed) string {
	if p.Type == dlevents.TypeGap {
		return fmt.Sprintf("-- %d events lost (this client read too slowly) --", p.Lost)
	}
	to := strings.Join(p.TargetQueues, ",")
	if p.DropCause != nil {
		to = "dropped:" + *p.DropCause
		if p.Outcome == dlevents.OutcomeRetained {
			to = "retained:" + *p.DropCause
		}
	}
	id := ""
	if p.MessageID != nil {
		id = *p.MessageID
	}
	return strings.Join([]string{p.Time, p.Queue, p.Reason, fmt.Sprint(p.Count), p.Outcome, to, id}, "\t")
}
