package management

// RabbitMQ 4's AMQP 1.0 management node ("HTTP over AMQP" on the
// /management link pair), modelled on rabbit_amqp_management.erl and shaped
// for github.com/rabbitmq/rabbitmq-amqp-go-client.
//
// Every unexported identifier in the amqp*.go files starts with "amqp": the
// HTTP API lives in the same package.

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/deadletter"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/ratelog"
)

// AMQPOptions configure an AMQPNode.
type AMQPOptions struct {
	// Router is the data model. Nil refuses every
	// request (500).
	Router *router.Broker
	// Auth holds the users and their permissions. Nil refuses every
	// request (500).
	Auth *auth.Registry
	// DeadLetters is the dead-letter component (reserved; not used today).
	DeadLetters *deadletter.DeadLetterer
	// Logger receives a warning per failed request; nil discards.
	Logger *slog.Logger
	// Node is the node name reported as a queue's leader and only replica;
	// default "epitaph@" + the host name.
	Node string
}

// AMQPNode answers RabbitMQ 4's HTTP-over-AMQP management requests. It
// implements link.ManagementNode and is safe for concurrent use.
type AMQPNode struct {
	rt   *router.Broker
	auth *auth.Registry
	log  *slog.Logger
	warn *ratelog.Limiter // failed requests: clients choose how many, so rate-limited
	node string
}

// NewAMQPNode returns a management node serving opts.Router.
func NewAMQPNode(opts AMQPOptions) *AMQPNode {
	n := &AMQPNode{rt: opts.Router, auth: opts.Auth, log: opts.Logger, node: opts.Node}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	n.warn = ratelog.New(n.log, 0)
	if n.node == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		n.node = "epitaph@" + host
	}
	return n
}

// HTTP status codes used in responses (the response subject).
const (
	amqpStatusOK          = "200"
	amqpStatusCreated     = "201"
	amqpStatusNoContent   = "204"
	amqpStatusBadRequest  = "400"
	amqpStatusForbidden   = "403"
	amqpStatusNotFound    = "404"
	amqpStatusBadMethod   = "405"
	amqpStatusConflict    = "409"
	amqpStatusServerError = "500"
)

// amqpFailure is an error answer: a status code and a utf8 explanation.
type amqpFailure struct {
	status string
	text   string
}

func (f *amqpFailure) Error() string { return f.status + " " + f.text }

func amqpFail(status, format string, args ...any) *amqpFailure {
	return &amqpFailure{status: status, text: fmt.Sprintf(format, args...)}
}

// amqpRequest is one decoded management request.
type amqpRequest struct {
	owner    any // the requesting connection (exclusive queues); nil when unknown
	user     string
	vh       *router.VHost
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
func (n *AMQPNode) Request(owner any, user string, vhost *router.VHost, req *amqp10.Message) []byte {
	props, err := req.Properties()
	if err != nil {
		return n.encode(nil, amqpStatusBadRequest, "malformed properties: "+err.Error())
	}
	var corr any
	if props != nil {
		corr = props.MessageID
	}
	status, body := n.handle(owner, user, vhost, props, req)
	return n.encode(corr, status, body)
}

// handle decodes and dispatches one request.
func (n *AMQPNode) handle(owner any, user string, vh *router.VHost, props *amqp10.Properties, m *amqp10.Message) (string, any) {
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
			return amqpStatusBadRequest, "request without properties.to (the request path)"
		case props.Subject == nil:
			return amqpStatusBadRequest, "request without properties.subject (the HTTP method)"
		case props.ReplyTo != nil && *props.ReplyTo != "$me":
			return amqpStatusBadRequest, fmt.Sprintf("reply-to must be \"$me\", got %q", *props.ReplyTo)
		case n.rt == nil || vh == nil:
			return amqpStatusServerError, "management node has no virtual host"
		case n.auth == nil:
			return amqpStatusServerError, "management node has no user registry"
		}
		r := &amqpRequest{owner: owner, user: user, vh: vh, method: method}
		if f := r.parseTarget(target); f != nil {
			return f.status, f.text
		}
		var err error
		if r.body, err = amqpRequestBody(m); err != nil {
			return amqpStatusBadRequest, err.Error()
		}
		status, body, err := n.dispatch(r)
		if err != nil {
			var f *amqpFailure
			if errors.As(err, &f) {
				return f.status, f.text
			}
			return amqpStatusServerError, "internal error"
		}
		return status, body
	}()
	if status[0] != '2' {
		reason, _ := body.(string)
		n.warn.Warn("management request failed", "management request failed", "method", clip(method), "path", clip(target),
			"user", clip(user), "status", status, "reason", clip(reason))
	}
	return status, body
}

// parseTarget splits the request target into percent-decoded path segments
// and the query.
func (r *amqpRequest) parseTarget(target string) *amqpFailure {
	path, rawQuery, hasQuery := strings.Cut(target, "?")
	if !strings.HasPrefix(path, "/") {
		return amqpFail(amqpStatusBadRequest, "request path '%s' does not start with '/'", target)
	}
	r.raw = strings.Split(path[1:], "/")
	r.segments = make([]string, len(r.raw))
	for i, s := range r.raw {
		d, err := url.PathUnescape(s)
		if err != nil {
			return amqpFail(amqpStatusBadRequest, "failed to decode path segment '%s': %v", s, err)
		}
		r.segments[i] = d
	}
	if hasQuery {
		q, err := url.ParseQuery(rawQuery)
		if err != nil {
			return amqpFail(amqpStatusBadRequest, "failed to dissect query '%s': %v", rawQuery, err)
		}
		r.query = q
	}
	return nil
}

// amqpRequestBody returns the value of the request's amqp-value section
// (nil when there is none).
func amqpRequestBody(m *amqp10.Message) (any, error) {
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
	if !ok || !amqpIsDescriptor(d.Descriptor, amqp10.DescAMQPValue, "amqp:amqp-value:*") {
		return nil, errors.New("the request body must be an amqp-value section")
	}
	return d.Value, nil
}

func amqpIsDescriptor(d any, code uint64, name amqp10.Symbol) bool {
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
func (n *AMQPNode) dispatch(r *amqpRequest) (string, any, error) {
	seg := r.segments
	if r.query != nil && !(len(seg) == 1 && seg[0] == "bindings") {
		return "", nil, amqpFail(amqpStatusBadRequest, "unexpected query in request path")
	}
	allowed := func(methods ...string) error {
		return amqpFail(amqpStatusBadMethod, "method %s not allowed on /%s (allowed: %s)",
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
	case len(seg) == 2 && seg[0] == "auth" && seg[1] == "tokens":
		return "", nil, amqpFail(amqpStatusBadRequest, "token refresh is not supported: this broker has no OAuth 2.0 backend")
	}
	return "", nil, amqpFail(amqpStatusBadRequest, "unknown request path '/%s'", strings.Join(r.raw, "/"))
}

// encode builds the response message: properties (subject = status,
// correlation-id = the request's message-id, same type), application
// properties {"http:response": "1.1"}, and an amqp-value body.
func (n *AMQPNode) encode(corr any, status string, body any) []byte {
	b, err := amqpEncode(corr, status, body)
	if err != nil {
		n.log.Error("management response not encodable", "status", status, "err", err)
		if b, err = amqpEncode(corr, amqpStatusServerError, "internal error: response not encodable"); err != nil {
			b, _ = amqpEncode(nil, amqpStatusServerError, "internal error: response not encodable")
		}
	}
	return b
}

func amqpEncode(corr any, status string, body any) ([]byte, error) {
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

// authorize checks r's user may access a resource (RabbitMQ's
// check_resource_access): 403 on refusal.
func (n *AMQPNode) authorize(r *amqpRequest, kind, name string, a auth.Access) error {
	if err := n.auth.Authorize(r.user, r.vh.Name(), kind, name, a); err != nil {
		return amqpFail(amqpStatusForbidden, "%s", amqpExplain(err))
	}
	return nil
}

// amqpRouterError maps a router error to a status: precondition failures
// 409, refusals 403, everything else (invalid arguments, locked exclusive
// queues, missing resources) 400, as rabbit_amqp_management does.
func amqpRouterError(err error) error {
	status := amqpStatusBadRequest
	switch {
	case errors.Is(err, router.ErrPreconditionFailed):
		status = amqpStatusConflict
	case errors.Is(err, router.ErrAccessRefused):
		status = amqpStatusForbidden
	}
	return amqpFail(status, "%s", amqpExplain(err))
}

// amqpSentinels are the router errors whose text prefixes explanations.
var amqpSentinels = []error{
	router.ErrNotFound, router.ErrPreconditionFailed, router.ErrInvalidArgument,
	router.ErrAccessRefused, router.ErrResourceLocked, router.ErrInvalidXCC,
}

// amqpExplain returns err's text without the router's "router: <kind>: "
// prefix.
func amqpExplain(err error) string {
	s := err.Error()
	for _, e := range amqpSentinels {
		if p := e.Error() + ": "; strings.HasPrefix(s, p) {
			return s[len(p):]
		}
	}
	return s
}

// amqpCheckName refuses names with a carriage return or line feed (400).
func amqpCheckName(name string) error {
	if strings.ContainsAny(name, "\r\n") {
		return amqpFail(amqpStatusBadRequest, "Bad name '%s': line feed and carriage return characters not allowed", name)
	}
	return nil
}

// amqpCheckReserved refuses resource names with the "amq." prefix (403).
func amqpCheckReserved(kind, name, vhost string) error {
	if strings.HasPrefix(name, "amq.") {
		return amqpFail(amqpStatusForbidden, "%s '%s' in vhost '%s' starts with reserved prefix 'amq.'", kind, name, vhost)
	}
	return nil
}

// amqpCheckDefaultExchange refuses operations on the default exchange (403).
func amqpCheckDefaultExchange(name string) error {
	if name == "" {
		return amqpFail(amqpStatusForbidden, "operation not permitted on the default exchange")
	}
	return nil
}
