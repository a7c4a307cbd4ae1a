package amqpnode

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/filter"
	"github.com/epitaph-mq/epitaph/management"
	"github.com/epitaph-mq/epitaph/management/dlops"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/ratelog"
)

// Options configure a Node.
type Options struct {
	// Router is the data model. Nil refuses every
	// request (500).
	Router *router.Broker
	// Auth holds the users and their permissions. Nil refuses every
	// request (500).
	Auth *auth.Registry
	// Logger receives a warning per failed request; nil discards.
	Logger *slog.Logger
	// Node is the node name reported as a queue's leader and only replica;
	// "" means management.NodeName().
	Node string
	// Redrives runs redrive tasks (/redrives); nil answers 404 there.
	Redrives *dlops.Manager
	// PeekMaxScan bounds the messages one peek (GET /queues/{q}/peek)
	// tests (0: dlops.DefaultPeekMaxScan); FilterLimits bound its SQL
	// filter (zero: filter's defaults).
	PeekMaxScan  int
	FilterLimits filter.Limits
}

// TokenConnection is what the management node needs of a connection whose
// user may authenticate with an OAuth 2 token (the owner passed to
// Request): its token, for the permissions of a request, and the
// replacement of its token (PUT /auth/tokens). Both are called on the
// connection's own goroutine, as Request is.
type TokenConnection interface {
	AuthToken() *auth.Token
	RefreshToken(raw string) error
}

// Node answers RabbitMQ 4's HTTP-over-AMQP management requests. It
// implements link.ManagementNode and is safe for concurrent use.
type Node struct {
	rt   *router.Broker
	auth *auth.Registry
	log  *slog.Logger
	warn *ratelog.Limiter // failed requests: clients choose how many, so rate-limited
	node string

	redrive      *dlops.Manager
	peekMaxScan  int
	filterLimits filter.Limits
}

// New returns a management node serving opts.Router.
func New(opts Options) *Node {
	n := &Node{rt: opts.Router, auth: opts.Auth, log: opts.Logger, node: opts.Node, redrive: opts.Redrives,
		peekMaxScan: opts.PeekMaxScan, filterLimits: opts.FilterLimits}
	if n.filterLimits == (filter.Limits{}) {
		n.filterLimits = filter.DefaultLimits()
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	n.warn = ratelog.New(n.log, 0)
	if n.node == "" {
		n.node = management.NodeName()
	}
	return n
}

// HTTP status codes used in responses (the response subject).
const (
	statusOK          = "200"
	statusCreated     = "201"
	statusNoContent   = "204"
	statusBadRequest  = "400"
	statusForbidden   = "403"
	statusNotFound    = "404"
	statusBadMethod   = "405"
	statusConflict    = "409"
	statusServerError = "500"
)

// failure is an error answer: a status code and a utf8 explanation.
type failure struct {
	status string
	text   string
}

func (f *failure) Error() string { return f.status + " " + f.text }

func fail(status, format string, args ...any) *failure {
	return &failure{status: status, text: fmt.Sprintf(format, args...)}
}

// request is one decoded management request.
type request struct {
	management.Operator // the requesting user and the link's vhost

	owner    any // the requesting connection (exclusive queues); nil when unknown
	method   string
	segments []string   // percent-decoded path segments after the leading "/"
	raw      []string   // the same segments, still encoded
	query    url.Values // nil without "?"
	body     any        // the amqp-value body (nil when absent or null)
}

// Request answers one management request for a connection with the encoded
// response message (it implements link.ManagementNode): owner is the value the
// link layer uses as router.QueueSpec.Owner and router.ConsumerOptions.Owner
// for that connection. Exclusive queues declared here are owned by it (and
// so deleted with the connection's other exclusive queues, as RabbitMQ
// does); exclusive queues of other owners are locked (400).
func (n *Node) Request(owner any, user string, vhost *router.VHost, req *amqp10.Message) []byte {
	props, err := req.Properties()
	if err != nil {
		return n.encode(nil, statusBadRequest, "malformed properties: "+err.Error())
	}
	var corr any
	if props != nil {
		corr = props.MessageID
	}
	status, body := n.handle(owner, user, vhost, props, req)
	return n.encode(corr, status, body)
}

// handle decodes and dispatches one request.
func (n *Node) handle(owner any, user string, vh *router.VHost, props *amqp10.Properties, m *amqp10.Message) (string, any) {
	method, target := "", ""
	if props != nil && props.Subject != nil {
		method = *props.Subject
	}
	if props != nil && props.To != nil {
		target = *props.To
	}
	status, body := func() (string, any) {
		switch {
		case props == nil || props.To == nil:
			return statusBadRequest, "request without properties.to (the request path)"
		case props.Subject == nil:
			return statusBadRequest, "request without properties.subject (the HTTP method)"
		case props.ReplyTo != nil && *props.ReplyTo != "$me":
			return statusBadRequest, fmt.Sprintf("reply-to must be \"$me\", got %q", *props.ReplyTo)
		case n.rt == nil || vh == nil:
			return statusServerError, "management node has no virtual host"
		case n.auth == nil:
			return statusServerError, "management node has no user registry"
		}
		r := &request{Operator: management.Operator{Auth: n.auth, User: user, VHost: vh}, owner: owner, method: method}
		if tc, ok := owner.(TokenConnection); ok {
			r.Token = tc.AuthToken()
		}
		if f := r.parseTarget(target); f != nil {
			return f.status, f.text
		}
		var err error
		if r.body, err = requestBody(m); err != nil {
			return statusBadRequest, err.Error()
		}
		status, body, err := n.dispatch(r)
		if err != nil {
			var f *failure
			if errors.As(err, &f) {
				return f.status, f.text
			}
			return statusServerError, "internal error"
		}
		return status, body
	}()
	if status[0] != '2' {
		reason, _ := body.(string)
		n.warn.Warn("management request failed", "management request failed", "method", management.Clip(method), "path", management.Clip(target),
			"user", management.Clip(user), "status", status, "reason", management.Clip(reason))
	}
	return status, body
}

// parseTarget splits the request target into percent-decoded path segments
// and the query.
func (r *request) parseTarget(target string) *failure {
	path, rawQuery, hasQuery := strings.Cut(target, "?")
	if !strings.HasPrefix(path, "/") {
		return fail(statusBadRequest, "request path '%s' does not start with '/'", target)
	}
	r.raw = strings.Split(path[1:], "/")
	r.segments = make([]string, len(r.raw))
	for i, s := range r.raw {
		d, err := url.PathUnescape(s)
		if err != nil {
			return fail(statusBadRequest, "failed to decode path segment '%s': %v", s, err)
		}
		r.segments[i] = d
	}
	if hasQuery {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return fail(statusBadRequest, "failed to dissect query '%s': %v", rawQuery, err)
		}
		r.query = q
	}
	return nil
}

// requestBody returns the value of the request's amqp-value section
// (nil when there is none).
func requestBody(m *amqp10.Message) (any, error) {
	raw, err := m.Body()
	if err != nil {
		return nil, fmt.Errorf("malformed body: %w", err)
	}
	if len(raw) == 0 {
		return nil, nil
	}
	v, _, err := amqp10.ReadValue(raw)
	if err != nil {
		return nil, fmt.Errorf("malformed body: %w", err)
	}
	d, ok := v.(*amqp10.Described)
	if !ok || !isDescriptor(d.Descriptor, amqp10.DescAMQPValue, "amqp:amqp-value:*") {
		return nil, errors.New("the request body must be an amqp-value section")
	}
	return d.Value, nil
}

func isDescriptor(d any, code uint64, name amqp10.Symbol) bool {
	switch d := d.(type) {
	case uint64:
		return d == code
	case amqp10.Symbol:
		return d == name
	}
	return false
}

// dispatch routes a request by method and path (rabbit_amqp_management's
// handle_http_req clauses).
func (n *Node) dispatch(r *request) (string, any, error) {
	seg := r.segments
	peek := len(seg) == 3 && seg[0] == "queues" && seg[2] == "peek" // epitaph's own: its filters are a query
	if r.query != nil && !(len(seg) == 1 && seg[0] == "bindings") && !peek {
		return "", nil, fail(statusBadRequest, "unexpected query in request path")
	}
	allowed := func(methods ...string) error {
		return fail(statusBadMethod, "method %s not allowed on /%s (allowed: %s)",
			r.method, strings.Join(r.raw, "/"), strings.Join(methods, ", "))
	}
	switch {
	case len(seg) == 2 && seg[0] == "queues":
		switch r.method {
		case "GET":
			return n.getQueue(r, seg[1])
		case "PUT":
			return n.declareQueue(r, seg[1])
		case "DELETE":
			return n.deleteQueue(r, seg[1])
		}
		return "", nil, allowed("GET", "PUT", "DELETE")
	case len(seg) == 3 && seg[0] == "queues" && seg[2] == "peek":
		if r.method == "GET" {
			return n.peekQueue(r, seg[1])
		}
		return "", nil, allowed("GET")
	case len(seg) == 3 && seg[0] == "queues" && seg[2] == "messages":
		if r.method == "DELETE" {
			return n.purgeQueue(r, seg[1])
		}
		return "", nil, allowed("DELETE")
	case len(seg) == 2 && seg[0] == "exchanges":
		switch r.method {
		case "PUT":
			return n.declareExchange(r, seg[1])
		case "DELETE":
			return n.deleteExchange(r, seg[1])
		}
		return "", nil, allowed("PUT", "DELETE")
	case len(seg) == 1 && seg[0] == "bindings":
		switch r.method {
		case "POST":
			return n.bind(r)
		case "GET":
			return n.listBindings(r)
		}
		return "", nil, allowed("POST", "GET")
	case len(seg) == 2 && seg[0] == "bindings":
		if r.method == "DELETE" {
			// the segment is matched encoded, as RabbitMQ does
			return n.unbind(r, r.raw[1])
		}
		return "", nil, allowed("DELETE")
	case (len(seg) == 1 || len(seg) == 2) && seg[0] == "redrives":
		return n.redrives(r, seg)
	case len(seg) == 3 && seg[0] == "redrives" && seg[2] == "report":
		if r.method == "DELETE" {
			return n.deleteRedrive(r, seg[1])
		}
		return "", nil, allowed("DELETE")
	case len(seg) == 2 && seg[0] == "auth" && seg[1] == "tokens":
		if r.method == "PUT" {
			return n.refreshToken(r)
		}
		return "", nil, allowed("PUT")
	}
	return "", nil, fail(statusBadRequest, "unknown request path '/%s'", strings.Join(r.raw, "/"))
}

// encode builds the response message: properties (subject = status,
// correlation-id = the request's message-id, same type), application
// properties {"http:response": "1.1"}, and an amqp-value body.
func (n *Node) encode(corr any, status string, body any) []byte {
	b, err := encodeResponse(corr, status, body)
	if err != nil {
		n.log.Error("management response not encodable", "status", status, "err", err)
		if b, err = encodeResponse(corr, statusServerError, "internal error: response not encodable"); err != nil {
			b, _ = encodeResponse(nil, statusServerError, "internal error: response not encodable")
		}
	}
	return b
}

func encodeResponse(corr any, status string, body any) ([]byte, error) {
	b, err := amqp10.AppendProperties(nil, &amqp10.Properties{Subject: &status, CorrelationID: corr})
	if err != nil {
		return nil, err
	}
	if b, err = amqp10.AppendApplicationProperties(b, amqp10.Map{{Key: "http:response", Value: "1.1"}}); err != nil {
		return nil, err
	}
	return amqp10.AppendAMQPValue(b, body)
}

// ---- permissions and errors ----

// forbidden answers a refusal of a management.Operator permission check
// with 403 and the router's explanation; nil stays nil.
func forbidden(err error) error {
	if err == nil {
		return nil
	}
	return fail(statusForbidden, "%s", explain(err))
}

// routerError maps a router error to a status: precondition failures
// 409, refusals 403, everything else (invalid arguments, locked exclusive
// queues, missing resources) 400, as rabbit_amqp_management does.
func routerError(err error) error {
	status := statusBadRequest
	switch {
	case errors.Is(err, router.ErrPreconditionFailed):
		status = statusConflict
	case errors.Is(err, router.ErrAccessRefused):
		status = statusForbidden
	}
	return fail(status, "%s", explain(err))
}

// sentinels are the router errors whose text prefixes explanations.
var sentinels = []error{
	router.ErrNotFound, router.ErrPreconditionFailed, router.ErrInvalidArgument,
	router.ErrAccessRefused, router.ErrResourceLocked, router.ErrInvalidXCC,
}

// explain returns err's text without the router's "router: <kind>: "
// prefix.
func explain(err error) string {
	s := err.Error()
	for _, e := range sentinels {
		if p := e.Error() + ": "; strings.HasPrefix(s, p) {
			return s[len(p):]
		}
	}
	return s
}

// checkName refuses names with a carriage return or line feed (400).
func checkName(name string) error {
	if strings.ContainsAny(name, "\r\n") {
		return fail(statusBadRequest, "Bad name '%s': line feed and carriage return characters not allowed", name)
	}
	return nil
}

// checkReserved refuses resource names with the "amq." prefix (403).
func checkReserved(kind, name, vhost string) error {
	if strings.HasPrefix(name, "amq.") {
		return fail(statusForbidden, "%s '%s' in vhost '%s' starts with reserved prefix 'amq.'", kind, name, vhost)
	}
	return nil
}

// checkDefaultExchange refuses operations on the default exchange (403).
func checkDefaultExchange(name string) error {
	if name == "" {
		return fail(statusForbidden, "operation not permitted on the default exchange")
	}
	return nil
}

// refreshToken: PUT /auth/tokens with the new token as a binary body
// (rabbit_amqp_management): 204, as RabbitMQ answers at once and updates
// the connection's credential after. A token the connection refuses
// (invalid, expired, another user, no access to the vhost) closes the
// connection with amqp:unauthorized-access, as RabbitMQ's reader does.
func (n *Node) refreshToken(r *request) (string, any, error) {
	if !n.auth.OAuthEnabled() {
		return "", nil, fail(statusBadRequest, "token refresh is not supported: this broker has no OAuth 2.0 backend")
	}
	tc, ok := r.owner.(TokenConnection)
	if !ok {
		return "", nil, fail(statusServerError, "token refresh needs a connection")
	}
	raw, ok := r.body.([]byte)
	if !ok {
		return "", nil, fail(statusBadRequest, "the token must be a binary body, got %T", r.body)
	}
	_ = tc.RefreshToken(string(raw)) // a refusal closes the connection; it logs why
	return statusNoContent, nil, nil
}
