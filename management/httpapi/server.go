package httpapi

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
	"github.com/epitaph-mq/epitaph/dlevents"
	"github.com/epitaph-mq/epitaph/filter"
	"github.com/epitaph-mq/epitaph/management"
	"github.com/epitaph-mq/epitaph/management/dlops"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/router/ratelog"
)

// Options configure the HTTP API.
type Options struct {
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
	// Connections is the registry of open AMQP connections behind
	// /api/connections; nil lists none.
	Connections Connections
	// Node is the node name the API reports (overview, alarms, queues,
	// connections); "" means management.NodeName().
	Node string
	// Events is the dead-letter event stream behind
	// /api/events/dead-letters; nil answers 404 there. EventsHeartbeat is
	// how often an idle stream gets a comment line (0 means
	// DefaultEventsHeartbeat); EventsWriteTimeout ends a stream whose
	// client takes nothing for that long (0: no time-out).
	Events             *dlevents.Hub
	EventsHeartbeat    time.Duration
	EventsWriteTimeout time.Duration
	// Redrives runs the redrive tasks behind /api/redrives; nil answers
	// 404 there (and lists none).
	Redrives *dlops.Manager
	// PeekMaxScan bounds the messages one peek tests (0 means
	// dlops.DefaultPeekMaxScan); FilterLimits bound its SQL filter (zero:
	// the filter package's defaults).
	PeekMaxScan  int
	FilterLimits filter.Limits
	// Console serves the web console under ConsolePrefix ("/" redirects
	// there); nil turns it off (those paths answer 404).
	Console http.Handler
}

// ConsolePrefix is the path the web console is served under.
const ConsolePrefix = "/console/"

// rabbitVersion is the RabbitMQ version the API reports (and mirrors).
const rabbitVersion = "4.3.0"

// maxBody bounds request bodies (definitions files included).
const maxBody = 32 << 20

// server serves the management HTTP API.
type server struct {
	b       *router.Broker
	auth    *auth.Registry
	dl      *deadletter.DeadLetterer
	log     *slog.Logger
	version string
	routes  []route
	metrics http.Handler

	getMaxCount, getMaxBytes int
	errLog                   *ratelog.Limiter

	conns Connections
	rates rateSampler
	qrate queueRates
	node  string

	events             *dlevents.Hub
	eventsHeartbeat    time.Duration
	eventsWriteTimeout time.Duration

	redrives     *dlops.Manager
	peekMaxScan  int
	filterLimits filter.Limits
	console      http.Handler
}

// handlerFunc handles one matched request; a returned error is written
// as RabbitMQ's JSON error.
type handlerFunc func(*request) error

// route is one path pattern: literal segments, or "*" for a
// percent-decoded wildcard segment.
type route struct {
	pattern []string
	methods map[string]handlerFunc
	noAuth  bool
}

// request is one authenticated request.
type request struct {
	w     http.ResponseWriter
	r     *http.Request
	user  string
	admin bool
	tags  []string
	token *auth.Token // the user's OAuth 2 token; nil for a stored user
	args  []string    // the wildcard segments, decoded
}

// apiError is an API error with its HTTP status.
type apiError struct {
	status int
	err    string // RabbitMQ's "error": bad_request, not_found, ...
	reason string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.err, e.reason) }

func errorf(status int, format string, a ...any) *apiError {
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
	case http.StatusServiceUnavailable:
		kind = "service_unavailable"
	}
	return &apiError{status: status, err: kind, reason: fmt.Sprintf(format, a...)}
}

// NewHandler returns the RabbitMQ-compatible management HTTP API, with
// HTTP basic authentication against the broker's users. Its paths, JSON
// shapes and statuses follow RabbitMQ 4.3's management plugin.
func NewHandler(opts Options) http.Handler {
	s := &server{b: opts.Router, auth: opts.Auth, dl: opts.DeadLetters, log: opts.Logger, version: opts.ProductVersion,
		metrics: opts.Metrics, conns: opts.Connections, node: opts.Node,
		events: opts.Events, eventsHeartbeat: opts.EventsHeartbeat, eventsWriteTimeout: opts.EventsWriteTimeout,
		redrives: opts.Redrives, peekMaxScan: cmpOrPositive(opts.PeekMaxScan, dlops.DefaultPeekMaxScan), filterLimits: opts.FilterLimits,
		console: opts.Console}
	if s.filterLimits == (filter.Limits{}) {
		s.filterLimits = filter.DefaultLimits()
	}
	if s.eventsHeartbeat <= 0 {
		s.eventsHeartbeat = DefaultEventsHeartbeat
	}
	if s.node == "" {
		s.node = management.NodeName()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.version == "" {
		s.version = "unknown"
	}
	s.getMaxCount, s.getMaxBytes = cmpOrPositive(opts.GetMaxCount, DefaultGetMaxCount), cmpOrPositive(opts.GetMaxBytes, DefaultGetMaxBytes)
	s.errLog = ratelog.New(s.log, 0)
	s.routes = s.routeTable()
	return s
}

// cmpOrPositive is v when positive, else def.
func cmpOrPositive(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func (s *server) routeTable() []route {
	type m = map[string]handlerFunc
	r := func(path string, methods m) route {
		return route{pattern: strings.Split(path, "/"), methods: methods}
	}
	open := func(path string, methods m) route {
		rt := r(path, methods)
		rt.noAuth = true
		return rt
	}
	return []route{
		open("health/checks/alarms", m{"GET": s.healthAlarms("There are alarms in effect in the cluster")}),
		open("health/checks/local-alarms", m{"GET": s.healthAlarms("There are alarms in effect on the node")}),
		open("health/checks/ready", m{"GET": s.health}),
		open("health/checks/virtual-hosts", m{"GET": s.health}),
		r("overview", m{"GET": s.overview}),
		r("events/dead-letters", m{"GET": s.deadLetterEvents}),
		r("whoami", m{"GET": s.whoami}),
		r("dead-letter-flows", m{"GET": s.deadLetterFlows}),
		r("dead-letter-flows/*", m{"GET": s.deadLetterFlows}),

		r("vhosts", m{"GET": s.listVHosts}),
		r("vhosts/*", m{"GET": s.getVHost, "PUT": s.putVHost, "DELETE": s.deleteVHost}),
		r("vhosts/*/permissions", m{"GET": s.vhostPermissions}),

		r("users", m{"GET": s.listUsers}),
		r("users/*", m{"GET": s.getUser, "PUT": s.putUser, "DELETE": s.deleteUser}),
		r("users/*/permissions", m{"GET": s.userPermissions}),

		r("permissions", m{"GET": s.listPermissions}),
		r("permissions/*/*", m{"GET": s.getPermission, "PUT": s.putPermission, "DELETE": s.deletePermission}),

		r("queues", m{"GET": s.listQueues}),
		r("queues/*", m{"GET": s.listQueues}),
		r("queues/*/*", m{"GET": s.getQueue, "PUT": s.putQueue, "DELETE": s.deleteQueue}),
		r("queues/*/*/contents", m{"DELETE": s.purgeQueue}),
		r("queues/*/*/get", m{"POST": s.getMessages}),
		r("queues/*/*/peek", m{"GET": s.peekQueue}),
		r("redrives", m{"GET": s.listRedrives, "POST": s.startRedrive}),
		r("redrives/*", m{"GET": s.getRedrive, "DELETE": s.cancelRedrive}),
		r("redrives/*/report", m{"DELETE": s.deleteRedrive}),
		r("queues/*/*/bindings", m{"GET": s.queueBindings}),

		r("exchanges", m{"GET": s.listExchanges}),
		r("exchanges/*", m{"GET": s.listExchanges}),
		r("exchanges/*/*", m{"GET": s.getExchange, "PUT": s.putExchange, "DELETE": s.deleteExchange}),
		r("exchanges/*/*/bindings/source", m{"GET": s.exchangeBindings(true)}),
		r("exchanges/*/*/bindings/destination", m{"GET": s.exchangeBindings(false)}),

		r("bindings", m{"GET": s.listBindings}),
		r("bindings/*", m{"GET": s.listBindings}),
		r("bindings/*/e/*/q/*", m{"GET": s.bindingsBetween(false), "POST": s.postBinding(false)}),
		r("bindings/*/e/*/e/*", m{"GET": s.bindingsBetween(true), "POST": s.postBinding(true)}),
		r("bindings/*/e/*/q/*/*", m{"GET": s.getBinding(false), "DELETE": s.deleteBinding(false)}),
		r("bindings/*/e/*/e/*/*", m{"GET": s.getBinding(true), "DELETE": s.deleteBinding(true)}),

		r("policies", m{"GET": s.listPolicies}),
		r("policies/*", m{"GET": s.listPolicies}),
		r("policies/*/*", m{"GET": s.getPolicy, "PUT": s.putPolicy, "DELETE": s.deletePolicy}),

		r("connections", m{"GET": s.listConnections}),
		r("connections/*", m{"GET": s.getConnection, "DELETE": s.closeConnection}),
		r("connections/*/channels", m{"GET": s.listChannels}),
		r("connections/*/sessions", m{"GET": s.connectionSessions}),
		r("vhosts/*/connections", m{"GET": s.listConnections}),
		r("channels", m{"GET": s.listChannels}),
		r("vhosts/*/channels", m{"GET": s.listChannels}),

		r("definitions", m{"GET": s.exportDefinitions, "POST": s.importDefinitions}),
		r("definitions/*", m{"GET": s.exportDefinitions, "POST": s.importDefinitions}),
	}
}

// ServeHTTP routes a request: unknown paths get 404, known paths with
// another method 405, and everything but the health checks needs basic auth.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.metrics != nil && r.URL.Path == "/metrics" {
		s.metrics.ServeHTTP(w, r)
		return
	}
	if s.console != nil {
		switch {
		case r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			http.Redirect(w, r, ConsolePrefix, http.StatusFound)
			return
		case r.URL.Path == strings.TrimSuffix(ConsolePrefix, "/"):
			http.Redirect(w, r, ConsolePrefix, http.StatusMovedPermanently)
			return
		case strings.HasPrefix(r.URL.Path, ConsolePrefix):
			s.console.ServeHTTP(w, r)
			return
		}
	}
	req := &request{w: w, r: r}
	if err := s.serve(req); err != nil {
		s.writeError(w, r, err)
	}
}

func (s *server) serve(req *request) error {
	r := req.r
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/api/")
	if !ok {
		return errorf(http.StatusNotFound, "Object Not Found")
	}
	rest = strings.TrimSuffix(rest, "/")
	raw := strings.Split(rest, "/")
	segs := make([]string, len(raw))
	for i, p := range raw {
		u, err := url.PathUnescape(p)
		if err != nil {
			return errorf(http.StatusBadRequest, "invalid percent-encoding in path segment %q", p)
		}
		segs[i] = u
	}
	route, args := s.match(segs)
	if route == nil {
		return errorf(http.StatusNotFound, "Object Not Found")
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
		return errorf(http.StatusMethodNotAllowed, "method %s not allowed on %s", r.Method, r.URL.Path)
	}
	req.args = args
	return h(req)
}

func (s *server) match(segs []string) (*route, []string) {
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
func (s *server) authenticate(req *request) error {
	user, pass, ok := req.r.BasicAuth()
	if bearer, isBearer := strings.CutPrefix(req.r.Header.Get("Authorization"), "Bearer "); isBearer {
		ok, pass = true, bearer
	}
	if ok && s.auth.OAuthEnabled() && auth.LooksLikeJWT(pass) {
		// A token as the password, or as a bearer token, as RabbitMQ's
		// management accepts one with the OAuth 2 backend: the token names
		// the user and its scopes are the permissions and tags.
		tok, err := s.auth.AuthenticateToken(pass)
		if err == nil {
			return s.tokenLogin(req, tok)
		}
		s.log.Info("HTTP API token refused", "err", err)
	}
	if ok && user == "guest" && !remoteIsLoopback(req.r.RemoteAddr) {
		// As on the AMQP listener (RabbitMQ's loopback_users): the peer's
		// address decides, not the listener's, so guest stays local
		// whatever --http-listen binds.
		s.authDelay(req.r)
		req.w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
		return errorf(http.StatusUnauthorized, "User can only log in via localhost")
	}
	if !ok || !s.auth.Authenticate(user, pass) {
		req.w.Header().Set("WWW-Authenticate", `Basic realm="RabbitMQ Management"`)
		if !ok {
			return errorf(http.StatusUnauthorized, "Not_Authorized")
		}
		s.authDelay(req.r)
		return errorf(http.StatusUnauthorized, "Login failed")
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
		return errorf(http.StatusUnauthorized, "Not management user")
	}
	return nil
}

// tokenLogin sets req's user from a validated token.
func (s *server) tokenLogin(req *request, tok *auth.Token) error {
	req.user, req.token, req.tags = tok.User, tok, tok.Tags
	req.admin = tok.HasTag("administrator")
	if !slices.ContainsFunc(req.tags, isManagementTag) {
		return errorf(http.StatusUnauthorized, "Not management user")
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
// does (auth.Registry.LoginFailed: longer for repeated failures from one
// address). A request without credentials is not a failure: browsers and
// clients send one first to learn the realm.
func (s *server) authDelay(r *http.Request) {
	d := s.auth.LoginFailed(remoteIP(r.RemoteAddr))
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

func (req *request) requireAdmin() error {
	if !req.admin {
		return errorf(http.StatusForbidden, "Not administrator user")
	}
	return nil
}

// requireTag allows administrators and users with one of tags.
func (req *request) requireTag(tags ...string) error {
	if req.admin {
		return nil
	}
	for _, t := range tags {
		if slices.Contains(req.tags, t) {
			return nil
		}
	}
	return errorf(http.StatusForbidden, "User not authorised: needs tag %s", strings.Join(tags, " or "))
}

// vhost returns the named vhost when it exists and the user may use it.
func (s *server) vhost(req *request, name string) (*router.VHost, error) {
	v, ok := s.b.VHost(name)
	if !ok {
		return nil, errorf(http.StatusNotFound, "vhost_not_found: no vhost '%s'", name)
	}
	if !s.operator(req, v).CanAccessVHost(name) {
		return nil, errorf(http.StatusForbidden, "User '%s' not authorised to access virtual host '%s'", req.user, name)
	}
	return v, nil
}

// visibleVHosts lists the vhosts the user may see: all of them for an
// administrator, else those it can access.
func (s *server) visibleVHosts(req *request) []*router.VHost {
	var out []*router.VHost
	for _, n := range s.b.VHosts() {
		v, ok := s.b.VHost(n)
		if !ok || (!req.admin && !s.operator(req, v).CanAccessVHost(n)) {
			continue
		}
		out = append(out, v)
	}
	return out
}

// operator is req's user acting on v, for the permission checks.
func (s *server) operator(req *request, v *router.VHost) management.Operator {
	return management.Operator{Auth: s.auth, User: req.user, VHost: v, Token: req.token}
}

// forbidden answers a refusal of a management.Operator permission check
// with 403; nil stays nil.
func forbidden(err error) error {
	if err == nil {
		return nil
	}
	return errorf(http.StatusForbidden, "%s", strings.TrimPrefix(err.Error(), router.ErrAccessRefused.Error()+": "))
}

// writeError writes err as RabbitMQ's {"error","reason"} with its status.
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var he *apiError
	if !errors.As(err, &he) {
		he = fromRouter(err)
	}
	if he.status >= 500 {
		s.errLog.Error("management request failed", "management request failed", "method", management.Clip(r.Method), "path", management.Clip(r.URL.Path), "err", management.Clip(err.Error()))
	} else {
		s.log.Debug("management request refused", "method", management.Clip(r.Method), "path", management.Clip(r.URL.Path), "status", he.status, "err", management.Clip(err.Error()))
	}
	writeJSON(w, he.status, map[string]string{"error": he.err, "reason": he.reason})
}

// fromRouter maps the router's sentinel errors to RabbitMQ's statuses.
func fromRouter(err error) *apiError {
	msg := err.Error()
	for _, sentinel := range []error{router.ErrNotFound, router.ErrPreconditionFailed, router.ErrInvalidArgument,
		router.ErrAccessRefused, router.ErrResourceLocked} {
		msg = strings.ReplaceAll(msg, sentinel.Error()+": ", "")
	}
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes):
		return errorf(http.StatusRequestEntityTooLarge, "request body larger than %d bytes", maxBytes.Limit)
	case errors.Is(err, router.ErrNotFound):
		return errorf(http.StatusNotFound, "%s", msg)
	case errors.Is(err, router.ErrAccessRefused):
		return errorf(http.StatusForbidden, "%s", msg)
	case errors.Is(err, router.ErrPreconditionFailed):
		// RabbitMQ's HTTP API answers PRECONDITION_FAILED with 400.
		return errorf(http.StatusBadRequest, "PRECONDITION_FAILED - %s", msg)
	case errors.Is(err, router.ErrResourceLocked):
		return errorf(http.StatusBadRequest, "RESOURCE_LOCKED - %s", msg)
	case errors.Is(err, router.ErrInvalidArgument):
		return errorf(http.StatusBadRequest, "%s", msg)
	}
	return errorf(http.StatusInternalServerError, "%s", msg)
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
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

func (req *request) ok(v any) error {
	writeJSON(req.w, http.StatusOK, v)
	return nil
}

// created answers 201 when something was created, else 204.
func (req *request) created(created bool) error {
	if created {
		req.w.WriteHeader(http.StatusCreated)
	} else {
		req.w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

func (req *request) noContent() error {
	req.w.WriteHeader(http.StatusNoContent)
	return nil
}

// readBody reads the request body (bounded); an empty body is "{}".
func (req *request) readBody() ([]byte, error) {
	if req.r.Body == nil {
		return []byte("{}"), nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(req.w, req.r.Body, maxBody))
	if err != nil {
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			return nil, fromRouter(err)
		}
		return nil, errorf(http.StatusBadRequest, "reading the request body: %v", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return []byte("{}"), nil
	}
	return b, nil
}

// decode reads a JSON object body into v (numbers as json.Number inside
// maps); any syntax or type error is a 400.
func (req *request) decode(v any) error {
	if ct := req.r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil && strings.HasPrefix(mt, "multipart/") {
			return errorf(http.StatusUnsupportedMediaType, "expected a JSON body, got %s", mt)
		}
	}
	b, err := req.readBody()
	if err != nil {
		return err
	}
	return unmarshal(b, v)
}

func unmarshal(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, "invalid JSON body: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "invalid JSON body: trailing data")
	}
	return nil
}
