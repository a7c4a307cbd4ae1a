package management

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/deadletter"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/ratelog"
)

// HTTPOptions configure the HTTP API.
type HTTPOptions struct {
	// Router is the broker's data model (required).
	Router *router.Broker
	// Auth holds the users and their permissions (required).
	Auth *auth.Registry
	// DeadLetters supplies the per-queue dead-letter counters; nil leaves
	// them out.
	DeadLetters *deadletter.DeadLetterer
	// Logger receives request errors; nil discards them.
	Logger *slog.Logger
	// ProductVersion is epitaph's version shown by /api/overview; "" shows
	// "unknown".
	ProductVersion string
	// Metrics serves GET /metrics (Prometheus text, no authentication, as
	// RabbitMQ's Prometheus endpoint); nil answers 404 there.
	Metrics http.Handler
	// GetMaxCount bounds the count of one POST .../get (above it: 400);
	// GetMaxBytes bounds the payload bytes it answers with (fewer messages,
	// and the HeaderGetTruncated header). 0 means DefaultGetMaxCount and
	// DefaultGetMaxBytes.
	GetMaxCount int
	GetMaxBytes int
}

// httpRabbitVersion is the RabbitMQ version the API reports (and mirrors).
const httpRabbitVersion = "4.3.0"

// httpMaxBody bounds request bodies (definitions files included).
const httpMaxBody = 32 << 20

// httpServer serves the management HTTP API.
type httpServer struct {
	b       *router.Broker
	auth    *auth.Registry
	dl      *deadletter.DeadLetterer
	log     *slog.Logger
	version string
	routes  []httpRoute
	metrics http.Handler

	getMaxCount, getMaxBytes int
	errLog                   *ratelog.Limiter
}

// httpHandlerFunc handles one matched request; a returned error is written
// as RabbitMQ's JSON error.
type httpHandlerFunc func(*httpReq) error

// httpRoute is one path pattern: literal segments, or "*" for a
// percent-decoded wildcard segment.
type httpRoute struct {
	pattern []string
	methods map[string]httpHandlerFunc
	noAuth  bool
}

// httpReq is one authenticated request.
type httpReq struct {
	w     http.ResponseWriter
	r     *http.Request
	user  string
	admin bool
	tags  []string
	args  []string // the wildcard segments, decoded
}

// httpError is an API error with its HTTP status.
type httpError struct {
	status int
	err    string // RabbitMQ's "error": bad_request, not_found, ...
	reason string
}

func (e *httpError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.err, e.reason) }

func httpErrorf(status int, format string, a ...any) *httpError {
	kind := "bad_request"
	switch status {
	case http.StatusUnauthorized:
		kind = "not_authorized"
	case http.StatusForbidden:
		kind = "not_authorised"
	case http.StatusNotFound:
		kind = "not_found"
	case http.StatusMethodNotAllowed:
		kind = "method_not_allowed"
	case http.StatusConflict:
		kind = "precondition_failed"
	case http.StatusInternalServerError:
		kind = "internal_error"
	}
	return &httpError{status: status, err: kind, reason: fmt.Sprintf(format, a...)}
}

// NewHTTPHandler returns the RabbitMQ-compatible management HTTP API, with
// HTTP basic authentication against the broker's users. Its paths, JSON
// shapes and statuses follow RabbitMQ 4.3's management plugin.
func NewHTTPHandler(opts HTTPOptions) http.Handler {
	s := &httpServer{b: opts.Router, auth: opts.Auth, dl: opts.DeadLetters, log: opts.Logger, version: opts.ProductVersion,
		metrics: opts.Metrics}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.version == "" {
		s.version = "unknown"
	}
	s.getMaxCount, s.getMaxBytes = cmpOrPositive(opts.GetMaxCount, DefaultGetMaxCount), cmpOrPositive(opts.GetMaxBytes, DefaultGetMaxBytes)
	s.errLog = ratelog.New(s.log, 0)
	s.routes = s.httpRoutes()
	return s
}

// cmpOrPositive is v when positive, else def.
func cmpOrPositive(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func (s *httpServer) httpRoutes() []httpRoute {
	type m = map[string]httpHandlerFunc
	r := func(path string, methods m) httpRoute {
		return httpRoute{pattern: strings.Split(path, "/"), methods: methods}
	}
	open := func(path string, methods m) httpRoute {
		rt := r(path, methods)
		rt.noAuth = true
		return rt
	}
	return []httpRoute{
		open("health/checks/alarms", m{"GET": s.httpHealthAlarms("There are alarms in effect in the cluster")}),
		open("health/checks/local-alarms", m{"GET": s.httpHealthAlarms("There are alarms in effect on the node")}),
		open("health/checks/ready", m{"GET": s.httpHealth}),
		open("health/checks/virtual-hosts", m{"GET": s.httpHealth}),
		r("overview", m{"GET": s.httpOverview}),
		r("whoami", m{"GET": s.httpWhoami}),

		r("vhosts", m{"GET": s.httpListVHosts}),
		r("vhosts/*", m{"GET": s.httpGetVHost, "PUT": s.httpPutVHost, "DELETE": s.httpDeleteVHost}),
		r("vhosts/*/permissions", m{"GET": s.httpVHostPermissions}),

		r("users", m{"GET": s.httpListUsers}),
		r("users/*", m{"GET": s.httpGetUser, "PUT": s.httpPutUser, "DELETE": s.httpDeleteUser}),
		r("users/*/permissions", m{"GET": s.httpUserPermissions}),

		r("permissions", m{"GET": s.httpListPermissions}),
		r("permissions/*/*", m{"GET": s.httpGetPermission, "PUT": s.httpPutPermission, "DELETE": s.httpDeletePermission}),

		r("queues", m{"GET": s.httpListQueues}),
		r("queues/*", m{"GET": s.httpListQueues}),
		r("queues/*/*", m{"GET": s.httpGetQueue, "PUT": s.httpPutQueue, "DELETE": s.httpDeleteQueue}),
		r("queues/*/*/contents", m{"DELETE": s.httpPurgeQueue}),
		r("queues/*/*/get", m{"POST": s.httpGetMessages}),
		r("queues/*/*/bindings", m{"GET": s.httpQueueBindings}),

		r("exchanges", m{"GET": s.httpListExchanges}),
		r("exchanges/*", m{"GET": s.httpListExchanges}),
		r("exchanges/*/*", m{"GET": s.httpGetExchange, "PUT": s.httpPutExchange, "DELETE": s.httpDeleteExchange}),
		r("exchanges/*/*/bindings/source", m{"GET": s.httpExchangeBindings(true)}),
		r("exchanges/*/*/bindings/destination", m{"GET": s.httpExchangeBindings(false)}),

		r("bindings", m{"GET": s.httpListBindings}),
		r("bindings/*", m{"GET": s.httpListBindings}),
		r("bindings/*/e/*/q/*", m{"GET": s.httpBindingsBetween(false), "POST": s.httpPostBinding(false)}),
		r("bindings/*/e/*/e/*", m{"GET": s.httpBindingsBetween(true), "POST": s.httpPostBinding(true)}),
		r("bindings/*/e/*/q/*/*", m{"GET": s.httpGetBinding(false), "DELETE": s.httpDeleteBinding(false)}),
		r("bindings/*/e/*/e/*/*", m{"GET": s.httpGetBinding(true), "DELETE": s.httpDeleteBinding(true)}),

		r("policies", m{"GET": s.httpListPolicies}),
		r("policies/*", m{"GET": s.httpListPolicies}),
		r("policies/*/*", m{"GET": s.httpGetPolicy, "PUT": s.httpPutPolicy, "DELETE": s.httpDeletePolicy}),

		r("definitions", m{"GET": s.httpExportDefinitions, "POST": s.httpImportDefinitions}),
		r("definitions/*", m{"GET": s.httpExportDefinitions, "POST": s.httpImportDefinitions}),
	}
}

// ServeHTTP routes a request: unknown paths get 404, known paths with
// another method 405, and everything but the health checks needs basic auth.
func (s *httpServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.metrics != nil && r.URL.Path == "/metrics" {
		s.metrics.ServeHTTP(w, r)
		return
	}
	req := &httpReq{w: w, r: r}
	if err := s.serve(req); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *httpServer) serve(req *httpReq) error {
	r := req.r
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/")
	if !ok {
		return httpErrorf(http.StatusNotFound, "Object Not Found")
	}
	rest = strings.TrimSuffix(rest, "/")
	raw := strings.Split(rest, "/")
	segs := make([]string, len(raw))
	for i, p := range raw {
		u, err := url.PathUnescape(p)
		if err != nil {
			return httpErrorf(http.StatusBadRequest, "invalid percent-encoding in path segment %q", p)
		}
		segs[i] = u
	}
	route, args := s.match(segs)
	if route == nil {
		return httpErrorf(http.StatusNotFound, "Object Not Found")
	}
	if !route.noAuth {
		if err := s.authenticate(req); err != nil {
			return err
		}
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	h, ok := route.methods[method]
	if !ok {
		allow := make([]string, 0, len(route.methods))
		for m := range route.methods {
			allow = append(allow, m)
		}
		slices.Sort(allow)
		req.w.Header().Set("Allow", strings.Join(allow, ", "))
		return httpErrorf(http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path)
	}
	req.args = args
	return h(req)
}

func (s *httpServer) match(segs []string) (*httpRoute, []string) {
	for i := range s.routes {
		rt := &s.routes[i]
		if len(rt.pattern) != len(segs) {
			continue
		}
		var args []string
		ok := true
		for j, p := range rt.pattern {
			if p == "*" {
				args = append(args, segs[j])
				continue
			}
			if p != segs[j] {
				ok = false
				break
			}
		}
		if ok {
			return rt, args
		}
	}
	return nil, nil
}

// authenticate checks HTTP basic credentials against the broker's users.
func (s *httpServer) authenticate(req *httpReq) error {
	user, pass, ok := req.r.BasicAuth()
	if ok && user == "guest" && !remoteIsLoopback(req.r.RemoteAddr) {
		// As on the AMQP listener (RabbitMQ's loopback_users): the peer's
		// address decides, not the listener's, so guest stays local
		// whatever --http-listen binds.
		s.authDelay(req.r)
		req.w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
		return httpErrorf(http.StatusUnauthorized, "User can only log in via localhost")
	}
	if !ok || !s.auth.Authenticate(user, pass) {
		req.w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
		if !ok {
			return httpErrorf(http.StatusUnauthorized, "Not_Authorized")
		}
		s.authDelay(req.r)
		return httpErrorf(http.StatusUnauthorized, "Login failed")
	}
	req.user = user
	if u, found := s.auth.User(user); found {
		req.tags = u.Tags
	} else if user == "guest" && len(s.auth.Users()) == 0 {
		req.tags = []string{"administrator"} // the implicit default user
	}
	req.admin = slices.Contains(req.tags, "administrator")
	if !slices.ContainsFunc(req.tags, isManagementTag) {
		// RabbitMQ's is_mgmt_user: the HTTP API is for users tagged for it,
		// whatever their permissions over AMQP.
		return httpErrorf(http.StatusUnauthorized, "Not management user")
	}
	return nil
}

// isManagementTag reports whether a user tag opens the HTTP API
// (RabbitMQ's is_mgmt_user); what each one may do there is checked per
// request (requireAdmin, requireTag, vhost permissions).
func isManagementTag(tag string) bool {
	switch tag {
	case "administrator", "monitoring", "policymaker", "management":
		return true
	}
	return false
}

// remoteIP is the address of an http.Request's RemoteAddr; the zero Addr
// when it does not parse.
func remoteIP(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// authDelay waits before a refused login is answered, as the AMQP listener
// does (router.Broker.AuthFailed: longer for repeated failures from one
// address). A request without credentials is not a failure: browsers and
// clients send one first to learn the realm.
func (s *httpServer) authDelay(r *http.Request) {
	d := s.b.AuthFailed(remoteIP(r.RemoteAddr))
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done(): // the client left, or the server is closing
	}
}

// remoteIsLoopback reports whether an http.Request's RemoteAddr
// ("host:port", as net/http sets it from the accepted socket) is a loopback
// address. Anything unparsable counts as remote.
func remoteIsLoopback(remote string) bool {
	return remoteIP(remote).IsLoopback()
}

func (req *httpReq) requireAdmin() error {
	if !req.admin {
		return httpErrorf(http.StatusForbidden, "Not administrator user")
	}
	return nil
}

// requireTag allows administrators and users with one of tags.
func (req *httpReq) requireTag(tags ...string) error {
	if req.admin {
		return nil
	}
	for _, t := range tags {
		if slices.Contains(req.tags, t) {
			return nil
		}
	}
	return httpErrorf(http.StatusForbidden, "User not authorised: needs tag %s", strings.Join(tags, " or "))
}

// vhost returns the named vhost when it exists and the user may use it.
func (s *httpServer) vhost(req *httpReq, name string) (*router.VHost, error) {
	v, ok := s.b.VHost(name)
	if !ok {
		return nil, httpErrorf(http.StatusNotFound, "vhost_not_found: no vhost '%s'", name)
	}
	if !s.auth.CanAccessVHost(req.user, name) {
		return nil, httpErrorf(http.StatusForbidden, "User '%s' not authorised to access virtual host '%s'", req.user, name)
	}
	return v, nil
}

// visibleVHosts lists the vhosts the user may see: all of them for an
// administrator, else those it can access.
func (s *httpServer) visibleVHosts(req *httpReq) []*router.VHost {
	var out []*router.VHost
	for _, n := range s.b.VHosts() {
		v, ok := s.b.VHost(n)
		if !ok || (!req.admin && !s.auth.CanAccessVHost(req.user, n)) {
			continue
		}
		out = append(out, v)
	}
	return out
}

// authorize is auth.Registry.Authorize with the refusal as a 403.
func (s *httpServer) authorize(req *httpReq, vhost, kind, name string, a auth.Access) error {
	if err := s.auth.Authorize(req.user, vhost, kind, name, a); err != nil {
		return httpErrorf(http.StatusForbidden, "%s", strings.TrimPrefix(err.Error(), router.ErrAccessRefused.Error()+": "))
	}
	return nil
}

// writeError writes err as RabbitMQ's {"error","reason"} with its status.
func (s *httpServer) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = httpFromRouter(err)
	}
	if he.status >= 500 {
		s.errLog.Error("management request failed", "management request failed", "method", clip(r.Method), "path", clip(r.URL.Path), "err", clip(err.Error()))
	} else {
		s.log.Debug("management request refused", "method", clip(r.Method), "path", clip(r.URL.Path), "status", he.status, "err", clip(err.Error()))
	}
	httpWriteJSON(w, he.status, map[string]string{"error": he.err, "reason": he.reason})
}

// httpFromRouter maps the router's sentinel errors to RabbitMQ's statuses.
func httpFromRouter(err error) *httpError {
	msg := err.Error()
	for _, sentinel := range []error{router.ErrNotFound, router.ErrPreconditionFailed, router.ErrInvalidArgument,
		router.ErrAccessRefused, router.ErrResourceLocked} {
		msg = strings.ReplaceAll(msg, sentinel.Error()+": ", "")
	}
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes):
		return httpErrorf(http.StatusRequestEntityTooLarge, "request body larger than %d bytes", maxBytes.Limit)
	case errors.Is(err, router.ErrNotFound):
		return httpErrorf(http.StatusNotFound, "%s", msg)
	case errors.Is(err, router.ErrAccessRefused):
		return httpErrorf(http.StatusForbidden, "%s", msg)
	case errors.Is(err, router.ErrPreconditionFailed):
		// RabbitMQ's HTTP API answers PRECONDITION_FAILED with 400.
		return httpErrorf(http.StatusBadRequest, "PRECONDITION_FAILED - %s", msg)
	case errors.Is(err, router.ErrResourceLocked):
		return httpErrorf(http.StatusBadRequest, "RESOURCE_LOCKED - %s", msg)
	case errors.Is(err, router.ErrInvalidArgument):
		return httpErrorf(http.StatusBadRequest, "%s", msg)
	}
	return httpErrorf(http.StatusInternalServerError, "%s", msg)
}

// httpWriteJSON writes v with status.
func httpWriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal_error","reason":"response encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (req *httpReq) ok(v any) error {
	httpWriteJSON(req.w, http.StatusOK, v)
	return nil
}

// created answers 201 when something was created, else 204.
func (req *httpReq) created(created bool) error {
	if created {
		req.w.WriteHeader(http.StatusCreated)
	} else {
		req.w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

func (req *httpReq) noContent() error {
	req.w.WriteHeader(http.StatusNoContent)
	return nil
}

// readBody reads the request body (bounded); an empty body is "{}".
func (req *httpReq) readBody() ([]byte, error) {
	if req.r.Body == nil {
		return []byte("{}"), nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(req.w, req.r.Body, httpMaxBody))
	if err != nil {
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			return nil, httpFromRouter(err)
		}
		return nil, httpErrorf(http.StatusBadRequest, "reading the request body: %v", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return []byte("{}"), nil
	}
	return b, nil
}

// decode reads a JSON object body into v (numbers as json.Number inside
// maps); any syntax or type error is a 400.
func (req *httpReq) decode(v any) error {
	if ct := req.r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil && strings.HasPrefix(mt, "multipart/") {
			return httpErrorf(http.StatusUnsupportedMediaType, "expected a JSON body, got %s", mt)
		}
	}
	b, err := req.readBody()
	if err != nil {
		return err
	}
	return httpUnmarshal(b, v)
}

func httpUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return httpErrorf(http.StatusBadRequest, "invalid JSON body: %v", err)
	}
	if dec.More() {
		return httpErrorf(http.StatusBadRequest, "invalid JSON body: trailing data")
	}
	return nil
}
