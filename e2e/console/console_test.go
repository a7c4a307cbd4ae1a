// Package console tests the web console end to end: an in-process broker
// with its HTTP listener, a real headless Chromium driven over the DevTools
// protocol (chromedp), and go-amqp clients making messages die while the
// page watches.
//
// Chromium missing skips the browser tests with the install command, or
// fails them when CI=true or EPITAPH_REQUIRE_INTEROP=1 (as .ci/run sets).
// EPITAPH_CONSOLE_SCREENSHOTS=DIR writes a PNG of each page into DIR (the
// README's screenshots are made so: see docs/console).
package console

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/Azure/go-amqp"
	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph"
)

// definitions: two queues dead-letter through the direct exchange dlx into
// dead.letters, orders by its queue arguments and payments by a policy.
const definitions = `{
  "vhosts": [{"name": "/"}],
  "exchanges": [{"name": "dlx", "vhost": "/", "type": "direct", "durable": true, "auto_delete": false, "internal": false, "arguments": {}}],
  "queues": [
    {"name": "orders", "vhost": "/", "durable": true, "auto_delete": false,
     "arguments": {"x-queue-type": "classic", "x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "dead"}},
    {"name": "payments", "vhost": "/", "durable": true, "auto_delete": false, "arguments": {"x-queue-type": "classic"}},
    {"name": "dead.letters", "vhost": "/", "durable": true, "auto_delete": false, "arguments": {"x-queue-type": "classic"}}
  ],
  "bindings": [{"source": "dlx", "vhost": "/", "destination": "dead.letters", "destination_type": "queue", "routing_key": "dead", "arguments": {}}],
  "policies": [{"vhost": "/", "name": "payments-dlx", "pattern": "^payments$", "apply-to": "queues", "priority": 0,
    "definition": {"dead-letter-exchange": "dlx", "dead-letter-routing-key": "dead"}}]
}`

// waitFor bounds every wait for the page.
const waitFor = 15 * time.Second

// chromium returns the path of a Chromium binary, or skips the test (fails
// it in CI) when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why, fix = "no headless Chromium for the console's browser tests", "apt-get install chromium"
	if os.Getenv("CI") == "true" || os.Getenv("EPITAPH_REQUIRE_INTEROP") == "1" {
		t.Fatalf("%s (CI): %s", why, fix)
	}
	t.Skipf("%s: %s", why, fix)
	return ""
}

// startBroker starts an in-process broker with AMQP and HTTP on free
// loopback ports and the test's definitions.
func startBroker(t *testing.T, mod ...func(*epitaph.Options)) *epitaph.Broker {
	t.Helper()
	opts := epitaph.DefaultOptions()
	opts.Listen, opts.HTTPListen, opts.InMemory = "127.0.0.1:0", "127.0.0.1:0", true
	opts.Definitions = []byte(definitions)
	opts.AuthFailureDelay = 0
	for _, m := range mod {
		m(&opts)
	}
	b, err := epitaph.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

func baseURL(b *epitaph.Broker) string { return "http://" + b.HTTPAddr().String() }

// browser opens a headless Chromium tab, logs in to the console as guest and
// returns the tab's context.
func browser(t *testing.T, b *epitaph.Broker) context.Context {
	t.Helper()
	return browserAs(t, b, "guest", "guest")
}

// browserTab starts a headless Chromium and returns a context for its
// first tab, on about:blank.
func browserTab(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // the CI container runs as root
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1400, 1000),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(cancelTab)
	// The first action starts the browser, which lives as long as that
	// action's context: so no time-out on this one.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	return ctx
}

// browserAs is browser logging in with user and password (an empty user
// and a token as the password log in with an OAuth 2 token).
func browserAs(t *testing.T, b *epitaph.Broker, user, password string) context.Context {
	t.Helper()
	ctx := browserTab(t)
	run(t, ctx,
		chromedp.Navigate(baseURL(b)+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=user]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=user]`), user),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), password),
		chromedp.Click(chromedp.CSS(`form[name=login] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`header .who`)),
	)
	waitJS(t, ctx, "the live event stream", `document.querySelector('[data-testid=live]').dataset.connected === 'true'`)
	return ctx
}

// evalJS evaluates expr in the page.
func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	out, err := chromedp.Run(c, chromedp.Evaluate[T](expr))
	require.NoError(t, err, "evaluating %s", expr)
	return out
}

// waitJS polls the page until expr is true, failing after waitFor.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	_, err := chromedp.Run(c, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(waitFor)))
	require.NoError(t, err, "waiting for %s (%s)", what, expr)
}

// waitSection polls until cond holds in the page, failing at once with the
// text of an error box shown in the section (an API error such as a 404 of
// an endpoint this broker lacks) instead of waiting out the deadline.
func waitSection(t *testing.T, ctx context.Context, section, what, cond string) {
	t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector('[data-testid=%s] .error'); if (e) return 'error: ' + e.textContent; return (%s) ? 'ok' : ''; })()`, section, cond)
	c, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	got, err := chromedp.Run(c, chromedp.Poll[string](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(waitFor)))
	require.NoError(t, err, "waiting for %s (%s)", what, cond)
	require.Equal(t, "ok", got, "waiting for %s", what)
}

// run runs browser actions within waitFor.
func run(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	require.NoError(t, chromedp.Do(c, actions...))
}

// screenshot writes the whole page as DIR/name.png when
// EPITAPH_CONSOLE_SCREENSHOTS=DIR is set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("EPITAPH_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	c, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100)) // quality 100: PNG
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// edgeText is the label line of reason on the graph edge between two nodes
// (given as the console's node ids), or "" when there is none.
func edgeText(t *testing.T, ctx context.Context, from, to []string, reason string) string {
	t.Helper()
	// The console's node ids are JSON.stringify of [kind, vhost, name],
	// which leaves < and > as they are.
	id := func(p []string) string { return jsJSON(p) }
	edge := jsJSON(id(from) + ">" + id(to))
	expr := fmt.Sprintf(`(() => {
		const e = [...document.querySelectorAll('g.edge')].find((g) => g.dataset.edge === %s);
		if (!e) return '';
		if (%q === '') return e.textContent;
		const r = [...e.querySelectorAll('[data-reason]')].find((x) => x.dataset.reason === %q);
		return r ? r.textContent : '';
	})()`, edge, reason, reason)
	return evalJS[string](t, ctx, expr)
}

var reasonCount = regexp.MustCompile(`^(\w+) (\d+) · `)

// waitEdgeCount waits until the edge's line for reason shows want deaths.
func waitEdgeCount(t *testing.T, ctx context.Context, from, to []string, reason string, want int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	var last string
	for time.Now().Before(deadline) {
		last = edgeText(t, ctx, from, to, reason)
		if m := reasonCount.FindStringSubmatch(last); m != nil && m[1] == reason {
			if n, _ := strconv.Atoi(m[2]); n == want {
				return
			}
		}
		time.Sleep(50 * time.Millisecond) // polling the page, bounded by the deadline
	}
	t.Fatalf("edge %v -> %v: want %s %d, last label %q", from, to, reason, want, last)
}

// amqpClient is a go-amqp session on the broker.
func amqpSession(t *testing.T, b *epitaph.Broker) *amqp.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	conn, err := amqp.Dial(ctx, "amqp://"+b.Addr().String(), &amqp.ConnOptions{SASLType: amqp.SASLTypeAnonymous()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	s, err := conn.NewSession(ctx, nil)
	require.NoError(t, err)
	return s
}

// publish sends msgs to queue and waits for each to be accepted.
func publish(t *testing.T, s *amqp.Session, queue string, msgs ...*amqp.Message) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	snd, err := s.NewSender(ctx, "/queues/"+urlEscape(queue), nil)
	require.NoError(t, err)
	defer snd.Close(ctx)
	for _, m := range msgs {
		require.NoError(t, snd.Send(ctx, m, nil))
	}
}

// rejecter consumes queue one message at a time.
type rejecter struct {
	t   *testing.T
	rcv *amqp.Receiver
}

func newRejecter(t *testing.T, s *amqp.Session, queue string) *rejecter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	rcv, err := s.NewReceiver(ctx, "/queues/"+urlEscape(queue), &amqp.ReceiverOptions{Credit: 1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rcv.Close(context.Background()) })
	return &rejecter{t: t, rcv: rcv}
}

// rejectNext receives the next message and rejects it with e.
func (r *rejecter) rejectNext(e *amqp.Error) *amqp.Message {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	m, err := r.rcv.Receive(ctx, nil)
	require.NoError(r.t, err)
	require.NoError(r.t, r.rcv.RejectMessage(ctx, m, e))
	return m
}

func withID(id string, body string) *amqp.Message {
	m := amqp.NewMessage([]byte(body))
	m.Properties = &amqp.MessageProperties{MessageID: id}
	return m
}

// queueDepth reads a queue's message count from the broker.
func queueDepth(t *testing.T, b *epitaph.Broker, name string) int {
	t.Helper()
	v, ok := b.Router().VHost("/")
	require.True(t, ok)
	q, ok := v.Queue(name)
	require.True(t, ok, "queue %s", name)
	info := q.Info()
	return info.Messages + info.MessagesUnacknowledged
}

func httpGet(t *testing.T, url string, auth bool) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if auth {
		req.SetBasicAuth("guest", "guest")
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, body
}

var (
	ordersNode  = []string{"q", "/", "orders"}
	paymentsNod = []string{"q", "/", "payments"}
	dlxNode     = []string{"x", "/", "dlx"}
	deadNode    = []string{"q", "/", "dead.letters"}
)

// The flow graph shows both flows (by argument and by policy) through the
// dead-letter exchange into the dead-letter queue, and the rejected edge
// counts up, live, as a consumer rejects messages.
func TestConsoleFlowGraphCountsRejections(t *testing.T) {
	b := startBroker(t)
	ctx := browser(t, b)
	waitJS(t, ctx, "the flow graph", `document.querySelectorAll('g.edge').length >= 3`)
	require.Contains(t, edgeText(t, ctx, ordersNode, dlxNode, ""), "queue argument")
	require.Contains(t, edgeText(t, ctx, paymentsNod, dlxNode, ""), "policy payments-dlx")
	require.Contains(t, edgeText(t, ctx, dlxNode, deadNode, ""), "key dead")
	require.Empty(t, edgeText(t, ctx, ordersNode, dlxNode, "rejected"), "no death yet")

	s := amqpSession(t, b)
	publish(t, s, "orders", withID("order-1", "one"), withID("order-2", "two"), withID("order-3", "three"))
	r := newRejecter(t, s, "orders")
	for i := 1; i <= 3; i++ {
		r.rejectNext(&amqp.Error{Condition: "app:invalid", Description: "no such product"})
		waitEdgeCount(t, ctx, ordersNode, dlxNode, "rejected", i)
	}
	waitEdgeCount(t, ctx, dlxNode, deadNode, "rejected", 3)
	require.Empty(t, edgeText(t, ctx, paymentsNod, dlxNode, "rejected"), "payments rejected nothing")
	waitJS(t, ctx, "the recent deaths", `document.querySelector('[data-testid=recent-deaths] .msgid')?.textContent === 'order-3'`)
	waitJS(t, ctx, "the DLQ's depth on its node", `[...document.querySelectorAll('g.node')].some((n) => n.dataset.node === '["q","/","dead.letters"]' && n.textContent.includes('3 messages'))`)
	screenshot(t, ctx, "flows")

	// The queue page of the DLQ: its depth and the deaths that arrived.
	run(t, ctx, chromedp.Click(chromedp.CSS(`g.node.dlq a`)))
	waitJS(t, ctx, "the queue page", `document.querySelector('[data-testid=queue-name]')?.textContent === 'dead.letters'`)
	waitJS(t, ctx, "the DLQ's depth", `document.querySelector('[data-testid=depth]')?.textContent === '3'`)
	require.Equal(t, 3, queueDepth(t, b, "dead.letters"))
	// Live: one more death moves the depth without reloading.
	publish(t, s, "orders", withID("order-4", "four"))
	r.rejectNext(nil)
	waitJS(t, ctx, "the DLQ's depth after one more death", `document.querySelector('[data-testid=depth]')?.textContent === '4'`)
	waitJS(t, ctx, "the DLQ's message counts", `document.querySelector('[data-testid=publish-count]')?.textContent === '4' && document.querySelector('[data-testid=deliver-count]')?.textContent === '0'`)
	waitJS(t, ctx, "the arrivals by source", `document.querySelector('[data-testid=arrivals] tr[data-source="orders"][data-reason="rejected"] td:nth-child(3)')?.textContent === '4'`)
	screenshot(t, ctx, "queue")
}

// Strings from messages and names are text, never markup: a message id, a
// rejection error and a queue name holding markup show as themselves, and
// nothing of them runs.
func TestConsoleEscapesEventStrings(t *testing.T) {
	const evilQueue = `evil<script>window.__pwned=1</script>`
	const evilID = `<script>window.__pwned=2</script>`
	const evilError = `<img src=x onerror="window.__pwned=3">`
	b := startBroker(t)
	ctx := browser(t, b)
	s := amqpSession(t, b)
	// A queue named with markup, dead-lettering into dead.letters.
	declare(t, baseURL(b), evilQueue, map[string]any{"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "dead"})
	publish(t, s, evilQueue, withID(evilID, "x"))
	r := newRejecter(t, s, evilQueue)
	r.rejectNext(&amqp.Error{Condition: "app:bad", Description: evilError})

	evilNode := []string{"q", "/", evilQueue}
	waitEdgeCount(t, ctx, evilNode, dlxNode, "rejected", 1)
	waitJS(t, ctx, "the recent death", `document.querySelector('[data-testid=recent-deaths] .msgid')?.textContent === `+jsString(evilID))
	require.Equal(t, "app:bad: "+evilError, evalJS[string](t, ctx, `document.querySelector('[data-testid=recent-deaths] .err').textContent`))
	require.True(t, evalJS[bool](t, ctx, `[...document.querySelectorAll('g.node text')].some((n) => n.textContent === `+jsString(evilQueue)+`)`))
	require.True(t, evalJS[bool](t, ctx, `window.__pwned === undefined`), "markup from the broker ran")
	require.Zero(t, evalJS[int](t, ctx, `document.querySelectorAll('img').length`), "markup from the broker became an element")
	require.Equal(t, 2, evalJS[int](t, ctx, `document.querySelectorAll('script').length`), "only the import map and app.js are scripts")

	// The queue page of the queue named with markup.
	run(t, ctx, chromedp.Navigate(baseURL(b)+"/console/#/queue/%2F/"+urlEscape(evilQueue)))
	waitJS(t, ctx, "the queue page", `document.querySelector('[data-testid=queue-name]')?.textContent === `+jsString(evilQueue))
	require.True(t, evalJS[bool](t, ctx, `window.__pwned === undefined`))
}

// The peek browser lists a DLQ's messages with their death histories and
// filters them; a redrive is dry-run first, then run, and the DLQ empties
// into the origin queue. Needs the peek and redrive API.
func TestConsolePeekFilterAndRedrive(t *testing.T) {
	b := startBroker(t)
	ctx := browser(t, b)
	s := amqpSession(t, b)
	publish(t, s, "orders", withID("order-1", "one"), withID("order-2", "two"), withID("order-3", "three"))
	publish(t, s, "payments", withID("pay-1", "p1"), withID("pay-2", "p2"))
	ro, rp := newRejecter(t, s, "orders"), newRejecter(t, s, "payments")
	for range 3 {
		ro.rejectNext(nil)
	}
	for range 2 {
		rp.rejectNext(nil)
	}
	require.Eventually(t, func() bool { return queueDepth(t, b, "dead.letters") == 5 }, waitFor, 20*time.Millisecond)

	run(t, ctx, chromedp.Navigate(baseURL(b)+"/console/#/queue/%2F/dead.letters"))
	waitJS(t, ctx, "the DLQ's depth", `document.querySelector('[data-testid=depth]')?.textContent === '5'`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`button[name=peek]`)))
	waitSection(t, ctx, "peek", "five peeked messages", `document.querySelectorAll('[data-testid=peeked-message]').length === 5`)
	// Filter on the source queue.
	run(t, ctx, chromedp.SendKeys(chromedp.CSS(`[data-testid=peek] input[name=source_queue]`), "orders"), chromedp.Click(chromedp.CSS(`button[name=peek]`)))
	waitSection(t, ctx, "peek", "three peeked messages from orders", `document.querySelectorAll('[data-testid=peeked-message]').length === 3`)
	ids := evalJS[[]string](t, ctx, `[...document.querySelectorAll('[data-testid=peeked-message] .msgid')].map((e) => e.textContent)`)
	require.ElementsMatch(t, []string{"order-1", "order-2", "order-3"}, ids)
	require.True(t, evalJS[bool](t, ctx, `[...document.querySelectorAll('[data-testid=peeked-message] .deaths td')].some((td) => td.textContent === 'orders')`))
	require.Equal(t, 5, queueDepth(t, b, "dead.letters"), "peeking consumed nothing")
	screenshot(t, ctx, "peek")

	// Redrive the filtered messages to their first death queue: the start
	// button waits for a dry run.
	require.True(t, evalJS[bool](t, ctx, `document.querySelector('button[name=start]').disabled`))
	run(t, ctx, chromedp.Click(chromedp.CSS(`button[name=dry_run]`)))
	waitSection(t, ctx, "redrive", "the dry run's report", `[...document.querySelectorAll('[data-testid=would-move] tbody tr')].some((tr) => tr.textContent === 'orders3')`)
	require.Equal(t, 5, queueDepth(t, b, "dead.letters"), "a dry run moves nothing")
	screenshot(t, ctx, "redrive-dry-run")
	run(t, ctx, chromedp.Click(chromedp.CSS(`button[name=start]`)))
	waitSection(t, ctx, "redrive", "the redrive to complete", `document.querySelector('[data-testid=task-state]')?.textContent === 'completed'`)
	require.Equal(t, "3", evalJS[string](t, ctx, `document.querySelector('[data-testid=task-moved]').textContent`))
	waitJS(t, ctx, "the DLQ's depth after the redrive", `document.querySelector('[data-testid=depth]')?.textContent === '2'`)
	require.Equal(t, 2, queueDepth(t, b, "dead.letters"))
	require.Equal(t, 3, queueDepth(t, b, "orders"), "the origin queue filled")
	waitJS(t, ctx, "the peek page read again", `document.querySelectorAll('[data-testid=peeked-message]').length === 0`)
	waitJS(t, ctx, "the queue's task list", `document.querySelector('[data-testid=redrive] details summary')?.textContent === '1 redrive task(s) from this queue'`)
	screenshot(t, ctx, "redrive")
}

// A rate-limited redrive shows its progress while it runs and can be
// cancelled from the page; what it had not moved stays in the DLQ. Needs the
// redrive API.
func TestConsoleRedriveProgressAndCancel(t *testing.T) {
	const n = 30
	b := startBroker(t)
	ctx := browser(t, b)
	s := amqpSession(t, b)
	msgs := make([]*amqp.Message, n)
	for i := range msgs {
		msgs[i] = withID(fmt.Sprintf("order-%d", i), "x")
	}
	publish(t, s, "orders", msgs...)
	r := newRejecter(t, s, "orders")
	for range n {
		r.rejectNext(nil)
	}
	require.Eventually(t, func() bool { return queueDepth(t, b, "dead.letters") == n }, waitFor, 20*time.Millisecond)

	run(t, ctx, chromedp.Navigate(baseURL(b)+"/console/#/queue/%2F/dead.letters"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=redrive] input[name=rate]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=redrive] input[name=rate]`), "3"),
		chromedp.Click(chromedp.CSS(`button[name=dry_run]`)))
	waitSection(t, ctx, "redrive", "the dry run's report", `[...document.querySelectorAll('[data-testid=would-move] tbody tr')].some((tr) => tr.textContent === 'orders`+strconv.Itoa(n)+`')`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`button[name=start]`)))
	waitSection(t, ctx, "redrive", "progress", `document.querySelector('[data-testid=task-state]')?.textContent === 'running' && Number(document.querySelector('[data-testid=task-moved]')?.textContent) >= 1`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`[data-testid=task] button[name=cancel]`)))
	waitSection(t, ctx, "redrive", "the cancelled task", `document.querySelector('[data-testid=task-state]')?.textContent === 'cancelled'`)
	moved, err := strconv.Atoi(evalJS[string](t, ctx, `document.querySelector('[data-testid=task-moved]').textContent`))
	require.NoError(t, err)
	require.Less(t, moved, n, "cancelled before the end")
	require.Equal(t, moved, queueDepth(t, b, "orders"), "what the task moved is in the origin queue")
	require.Equal(t, n-moved, queueDepth(t, b, "dead.letters"), "the rest stayed in the DLQ")
	screenshot(t, ctx, "redrive-cancelled")
}

// A wrong password is refused with the API's reason, nothing is shown and
// the refused credentials are not kept.
func TestConsoleLoginRefused(t *testing.T) {
	b := startBroker(t)
	tab := browserTab(t)
	run(t, tab,
		chromedp.Navigate(baseURL(b)+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=user]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=user]`), "guest"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "wrong"),
		chromedp.Click(chromedp.CSS(`form[name=login] button[type=submit]`)))
	waitJS(t, tab, "the refusal", `document.querySelector('.login .error')?.textContent === '401: Login failed'`)
	require.False(t, evalJS[bool](t, tab, `!!document.querySelector('header')`), "not logged in")
	require.Nil(t, evalJS[any](t, tab, `sessionStorage.getItem('epitaph-console-auth')`), "refused credentials are not kept")
}

// An OAuth 2 token pasted as the password (no user) logs in: the console
// sends it as a bearer token to the API and to the event stream, which
// shows the deaths of the queues its scopes may read.
func TestConsoleOAuthTokenLogin(t *testing.T) {
	key := []byte("console-test-hs256-key-of-32-bytes!")
	keyFile := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(keyFile, []byte(base64.RawURLEncoding.EncodeToString(key)), 0o600))
	b := startBroker(t, func(o *epitaph.Options) {
		o.OAuthResourceServerID = "rabbitmq"
		o.OAuthSigningKey = keyFile
	})
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "console-user", "aud": "rabbitmq", "exp": jwt.NewNumericDate(time.Now().Add(time.Hour)),
		"scope": []string{"rabbitmq.tag:management", "rabbitmq.read:%2F/*", "rabbitmq.write:%2F/*", "rabbitmq.configure:%2F/*"},
	}).SignedString(key)
	require.NoError(t, err)

	ctx := browserAs(t, b, "", token)
	require.Contains(t, evalJS[string](t, ctx, `document.querySelector('header .who').textContent`), "console-user")
	waitJS(t, ctx, "the flow graph", `document.querySelectorAll('g.edge').length >= 3`)
	s := amqpSession(t, b)
	publish(t, s, "orders", withID("order-1", "one"))
	newRejecter(t, s, "orders").rejectNext(nil)
	waitEdgeCount(t, ctx, ordersNode, dlxNode, "rejected", 1)
	waitJS(t, ctx, "the death in the live stream", `document.querySelector('[data-testid=recent-deaths] .msgid')?.textContent === 'order-1'`)

	// Logging out forgets the credentials and what the stream showed: the
	// next user of the tab starts from nothing.
	run(t, ctx, chromedp.Click(chromedp.CSS(`header button`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name=user]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=user]`), "guest"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "guest"),
		chromedp.Click(chromedp.CSS(`form[name=login] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`header .who`)))
	require.Contains(t, evalJS[string](t, ctx, `document.querySelector('header .who').textContent`), "guest")
	waitJS(t, ctx, "the flow graph", `document.querySelectorAll('g.edge').length >= 3`)
	require.Zero(t, evalJS[int](t, ctx, `document.querySelectorAll('[data-testid=recent-deaths] .msgid').length`))
}

// A body and an application property holding markup are shown as text by
// the peek browser. Needs the peek API.
func TestConsolePeekEscapesBodyAndHeaders(t *testing.T) {
	const evilBody = `<script>window.__pwned=1</script><b>bold</b>`
	const evilHeader = `<img src=x onerror="window.__pwned=2">`
	b := startBroker(t)
	ctx := browser(t, b)
	s := amqpSession(t, b)
	m := withID("evil-1", evilBody)
	m.ApplicationProperties = map[string]any{"note": evilHeader}
	publish(t, s, "orders", m)
	newRejecter(t, s, "orders").rejectNext(nil)
	require.Eventually(t, func() bool { return queueDepth(t, b, "dead.letters") == 1 }, waitFor, 20*time.Millisecond)

	run(t, ctx, chromedp.Navigate(baseURL(b)+"/console/#/queue/%2F/dead.letters"))
	waitJS(t, ctx, "the queue page", `document.querySelector('[data-testid=depth]')?.textContent === '1'`)
	run(t, ctx, chromedp.Click(chromedp.CSS(`button[name=peek]`)))
	waitSection(t, ctx, "peek", "the peeked message", `document.querySelectorAll('[data-testid=peeked-message]').length === 1`)
	require.Equal(t, evilBody, evalJS[string](t, ctx, `document.querySelector('[data-testid=body]').textContent`))
	require.Equal(t, evilHeader, evalJS[string](t, ctx, `document.querySelector('.app-props td').textContent`))
	require.True(t, evalJS[bool](t, ctx, `window.__pwned === undefined`), "markup from a message ran")
	require.Zero(t, evalJS[int](t, ctx, `document.querySelectorAll('img').length`), "markup from a message became an element")
	require.Zero(t, evalJS[int](t, ctx, `document.querySelector('[data-testid=body]').childElementCount`), "the body is one text node")
	require.Zero(t, evalJS[int](t, ctx, `document.querySelector('.app-props td').childElementCount`), "the property is one text node")
}

// The console is on by default at /console/ (/ redirects there) with a
// Content-Security-Policy that allows nothing from elsewhere, serves its
// vendored libraries from the binary, and is gone with web-console off.
func TestConsoleServedAndSwitchedOff(t *testing.T) {
	on := startBroker(t)
	res, body := httpGet(t, baseURL(on)+"/console/", false)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(body), `<script type="module" src="app.js">`)
	csp := res.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "default-src 'none'")
	require.Contains(t, csp, "connect-src 'self'")
	require.NotContains(t, csp, "http")
	res, _ = httpGet(t, baseURL(on)+"/", false)
	require.Equal(t, http.StatusFound, res.StatusCode)
	require.Equal(t, "/console/", res.Header.Get("Location"))
	for _, lib := range []string{"lib/preact/preact.module.js", "lib/preact/hooks.module.js", "lib/htm/htm.module.js", "lib/dagre/dagre.esm.js", "app.js"} {
		res, body = httpGet(t, baseURL(on)+"/console/"+lib, false)
		require.Equal(t, http.StatusOK, res.StatusCode, lib)
		require.Contains(t, res.Header.Get("Content-Type"), "javascript", lib)
		require.NotContains(t, string(body), "https://unpkg", lib)
	}
	res, _ = httpGet(t, baseURL(on)+"/console/lib/", false)
	require.Equal(t, http.StatusNotFound, res.StatusCode, "no directory listing")
	// The API behind it still wants credentials.
	res, _ = httpGet(t, baseURL(on)+"/api/dead-letter-flows", false)
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)

	off := startBroker(t, func(o *epitaph.Options) { o.WebConsole = false })
	for _, p := range []string{"/console/", "/console/app.js", "/"} {
		res, _ = httpGet(t, baseURL(off)+p, false)
		require.Equal(t, http.StatusNotFound, res.StatusCode, p)
	}
	res, _ = httpGet(t, baseURL(off)+"/api/overview", true)
	require.Equal(t, http.StatusOK, res.StatusCode, "the API stays on")
}

// GET /api/dead-letter-flows: each queue's effective dead-letter exchange,
// whether an argument or a policy set it, the target queues the broker's
// routing finds for its routing key, and its counters.
func TestDeadLetterFlowsEndpoint(t *testing.T) {
	b := startBroker(t)
	flows := func() map[string]map[string]any {
		res, body := httpGet(t, baseURL(b)+"/api/dead-letter-flows/%2F", true)
		require.Equal(t, http.StatusOK, res.StatusCode, string(body))
		var list []map[string]any
		require.NoError(t, json.Unmarshal(body, &list))
		out := map[string]map[string]any{}
		for _, f := range list {
			out[f["queue"].(string)] = f
		}
		return out
	}
	f := flows()
	require.NotContains(t, f, "dead.letters", "no dead-letter exchange, nothing counted")
	require.Equal(t, "dlx", f["orders"]["dead_letter_exchange"])
	require.Equal(t, "dead", f["orders"]["dead_letter_routing_key"])
	require.Equal(t, "argument", f["orders"]["configured_by"])
	require.Nil(t, f["orders"]["policy"])
	require.Equal(t, "routing_key", f["orders"]["routing"])
	require.Equal(t, []any{"dead.letters"}, f["orders"]["target_queues"])
	require.Equal(t, "policy", f["payments"]["configured_by"])
	require.Equal(t, "payments-dlx", f["payments"]["policy"])
	require.Equal(t, []any{"dead.letters"}, f["payments"]["target_queues"])
	require.Equal(t, true, f["payments"]["exchange_exists"])
	require.Equal(t, "direct", f["payments"]["exchange_type"])

	s := amqpSession(t, b)
	publish(t, s, "orders", withID("o-1", "x"))
	newRejecter(t, s, "orders").rejectNext(nil)
	require.Eventually(t, func() bool {
		c, _ := flows()["orders"]["dead_lettering"].(map[string]any)["rejected"].(map[string]any)
		return c != nil && c["dead_lettered"] == float64(1)
	}, waitFor, 20*time.Millisecond)

	res, _ := httpGet(t, baseURL(b)+"/api/dead-letter-flows/nope", true)
	require.Equal(t, http.StatusNotFound, res.StatusCode)
}

// declare declares a classic queue with args over the HTTP API.
func declare(t *testing.T, base, name string, args map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"durable": true, "arguments": args})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPut, base+"/api/queues/%2F/"+urlEscape(name), strings.NewReader(string(body)))
	require.NoError(t, err)
	req.SetBasicAuth("guest", "guest")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode, string(out))
}

// urlEscape percent-encodes a path segment as encodeURIComponent does.
func urlEscape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || strings.IndexByte("-_.!~*'()", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string { return jsJSON(s) }

// jsJSON is v as JSON.stringify writes it (no HTML escaping of <, >, &).
func jsJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
