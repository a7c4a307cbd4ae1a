package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"

	"github.com/epitaph-mq/epitaph/auth"
	"github.com/epitaph-mq/epitaph/router"
)

// noAccess is the permission pattern stored for RabbitMQ's "" (grants
// nothing): auth.Registry.SetPermission turns "" into ".*", so the API stores a
// pattern that matches no name and shows it as "" again.
const noAccess = `[^\s\S]`

func permIn(p string) string {
	if p == "" {
		return noAccess
	}
	return p
}

func permOut(p string) string {
	if p == noAccess {
		return ""
	}
	return p
}

// ---- health, overview, whoami ----

func (s *server) health(req *request) error {
	return req.ok(map[string]string{"status": "ok"})
}

// healthAlarms answers RabbitMQ's alarm health checks: 200 {"status":
// "ok"} without alarms, else 503 with the alarms in effect, as
// rabbit_mgmt_wm_health_check_alarms does (reason is the cluster or the node
// wording of the path asked).
func (s *server) healthAlarms(reason string) handlerFunc {
	return func(req *request) error {
		cur := s.b.Alarms().State()
		alarms := []map[string]string{}
		if cur.Memory {
			alarms = append(alarms, map[string]string{"resource": "memory", "node": s.node})
		}
		if cur.Disk {
			alarms = append(alarms, map[string]string{"resource": "disk space", "node": s.node})
		}
		if len(alarms) == 0 {
			return req.ok(map[string]string{"status": "ok"})
		}
		writeJSON(req.w, http.StatusServiceUnavailable, map[string]any{
			"status": "failed", "reason": reason, "alarms": alarms})
		return nil
	}
}

func (s *server) whoami(req *request) error {
	return req.ok(map[string]any{"name": req.user, "tags": tagList(req.tags)})
}

func tagList(tags []string) []string {
	if tags == nil {
		return []string{}
	}
	return tags
}

func (s *server) overview(req *request) error {
	out := map[string]any{
		"product_name":       "epitaph",
		"product_version":    s.version,
		"rabbitmq_version":   rabbitVersion,
		"management_version": rabbitVersion,
		"cluster_name":       "epitaph",
		"node":               s.node,
		"erlang_version":     "",
		"message_stats":      map[string]any{},
		"exchange_types":     exchangeTypes(),
	}
	if req.admin {
		var queues, exchanges, consumers, ready, unacked, delayed int
		for _, v := range s.visibleVHosts(req) {
			exchanges += len(v.Exchanges())
			for _, q := range v.Queues() {
				info := q.Info()
				queues++
				consumers += info.Consumers
				ready += info.Messages
				unacked += info.MessagesUnacknowledged
				delayed += info.MessagesDelayed
			}
		}
		out["object_totals"] = map[string]int{"queues": queues, "exchanges": exchanges, "consumers": consumers}
		out["queue_totals"] = map[string]int{
			"messages": ready + unacked + delayed, "messages_ready": ready, "messages_unacknowledged": unacked,
		}
		if s.dl != nil {
			totals := map[string]uint64{}
			for _, c := range s.dl.Stats() {
				totals["dead_lettered"] += c.DeadLettered
				totals["dropped_no_dlx"] += c.DroppedNoDLX
				totals["dropped_no_route"] += c.DroppedNoRoute
				totals["dropped_cycle"] += c.DroppedCycle
			}
			out["dead_lettering_totals"] = totals
		}
	}
	return req.ok(out)
}

// exchangeTypes is the overview's exchange_types: RabbitMQ lists every
// registered type, sorted by name, each enabled.
func exchangeTypes() []map[string]any {
	var out []map[string]any
	for _, t := range router.ExchangeTypes() {
		out = append(out, map[string]any{"name": t.Name, "description": t.Description, "enabled": true})
	}
	return out
}

// ---- vhosts ----

func (s *server) vhostJSON(v *router.VHost) map[string]any {
	var ready, unacked, delayed int
	for _, q := range v.Queues() {
		info := q.Info()
		ready += info.Messages
		unacked += info.MessagesUnacknowledged
		delayed += info.MessagesDelayed
	}
	return map[string]any{
		"name": v.Name(), "description": "", "tags": []string{}, "default_queue_type": "classic",
		"metadata": map[string]any{"description": "", "tags": []string{}, "default_queue_type": "classic"},
		"tracing":  false, "messages": ready + unacked + delayed, "messages_ready": ready, "messages_unacknowledged": unacked,
	}
}

func (s *server) listVHosts(req *request) error {
	out := []map[string]any{}
	for _, v := range s.visibleVHosts(req) {
		out = append(out, s.vhostJSON(v))
	}
	return req.ok(out)
}

func (s *server) getVHost(req *request) error {
	v, err := s.vhost(req, req.args[0])
	if err != nil {
		return err
	}
	return req.ok(s.vhostJSON(v))
}

func (s *server) putVHost(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	name := req.args[0]
	if name == "" {
		return errorf(http.StatusBadRequest, "vhost name is empty")
	}
	var body struct {
		Description      string `json:"description"`
		Tags             any    `json:"tags"`
		DefaultQueueType string `json:"default_queue_type"`
		Tracing          bool   `json:"tracing"`
	}
	if err := req.decode(&body); err != nil {
		return err
	}
	_, existed := s.b.VHost(name)
	if _, err := s.b.CreateVHost(name); err != nil {
		return err
	}
	if !existed {
		// RabbitMQ grants the creating user full access to a new vhost.
		if err := s.auth.SetPermission(auth.Permission{User: req.user, VHost: name, Configure: ".*", Write: ".*", Read: ".*"}); err != nil {
			s.log.Debug("no permission granted on new vhost", "vhost", name, "user", req.user, "err", err)
		}
	}
	return req.created(!existed)
}

func (s *server) deleteVHost(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	if err := s.b.DeleteVHost(req.args[0]); err != nil {
		return err
	}
	return req.noContent()
}

// ---- users ----

func userJSON(u auth.User) map[string]any {
	return map[string]any{
		"name": u.Name, "password_hash": u.PasswordHash, "hashing_algorithm": u.HashingAlgorithm,
		"tags": tagList(u.Tags), "limits": map[string]any{},
	}
}

// users lists the users, the implicit guest included while no user is defined.
func (s *server) users() []auth.User {
	users := s.auth.Users()
	if len(users) == 0 {
		return []auth.User{{Name: "guest", HashingAlgorithm: auth.HashSHA256, Tags: []string{"administrator"}}}
	}
	return users
}

func (s *server) listUsers(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	out := []map[string]any{}
	for _, u := range s.users() {
		out = append(out, userJSON(u))
	}
	return req.ok(out)
}

func (s *server) getUser(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	for _, u := range s.users() {
		if u.Name == req.args[0] {
			return req.ok(userJSON(u))
		}
	}
	return errorf(http.StatusNotFound, "no user '%s'", req.args[0])
}

// ensureGuest turns the implicit guest/guest user into a real one (tag
// administrator) before the first user is defined, as RabbitMQ's default
// user is real: defining another user must not lock guest out.
func (s *server) ensureGuest() error {
	if len(s.auth.Users()) > 0 {
		return nil
	}
	h, err := auth.HashPassword(auth.HashSHA256, "guest")
	if err != nil {
		return err
	}
	return s.auth.PutUser(auth.User{Name: "guest", PasswordHash: h, HashingAlgorithm: auth.HashSHA256, Tags: []string{"administrator"}})
}

func (s *server) putUser(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	name := req.args[0]
	if name == "" {
		return errorf(http.StatusBadRequest, "user name is empty")
	}
	var body struct {
		Password         *string         `json:"password"`
		PasswordHash     *string         `json:"password_hash"`
		HashingAlgorithm string          `json:"hashing_algorithm"`
		Tags             json.RawMessage `json:"tags"`
	}
	if err := req.decode(&body); err != nil {
		return err
	}
	tags, err := parseTags(body.Tags)
	if err != nil {
		return err
	}
	old, existed := s.auth.User(name)
	u := auth.User{Name: name, HashingAlgorithm: body.HashingAlgorithm, Tags: tags}
	switch {
	case body.Password != nil:
		if u.HashingAlgorithm == "" {
			u.HashingAlgorithm = auth.HashSHA256
		}
		if u.PasswordHash, err = auth.HashPassword(u.HashingAlgorithm, *body.Password); err != nil {
			return err
		}
	case body.PasswordHash != nil:
		u.PasswordHash = *body.PasswordHash
	case existed:
		u.PasswordHash, u.HashingAlgorithm = old.PasswordHash, old.HashingAlgorithm
	default:
		return errorf(http.StatusBadRequest, "Must specify password or password_hash")
	}
	if name != "guest" {
		if err := s.ensureGuest(); err != nil {
			return err
		}
	}
	if err := s.auth.PutUser(u); err != nil {
		return err
	}
	return req.created(!existed)
}

// parseTags accepts a list or RabbitMQ's comma-separated string.
func parseTags(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return nil, errorf(http.StatusBadRequest, "tags must be a list or a comma-separated string")
	}
	var out []string
	for t := range strings.SplitSeq(str, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out, nil
}

func (s *server) deleteUser(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	if err := s.auth.DeleteUser(req.args[0]); err != nil {
		return err
	}
	return req.noContent()
}

// ---- permissions ----

func permJSON(p auth.Permission) map[string]string {
	return map[string]string{"user": p.User, "vhost": p.VHost,
		"configure": permOut(p.Configure), "write": permOut(p.Write), "read": permOut(p.Read)}
}

func (s *server) permissions(keep func(auth.Permission) bool) []map[string]string {
	out := []map[string]string{}
	perms := s.auth.Permissions()
	for _, p := range perms {
		if keep(p) {
			out = append(out, permJSON(p))
		}
	}
	return out
}

func (s *server) listPermissions(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	return req.ok(s.permissions(func(auth.Permission) bool { return true }))
}

func (s *server) vhostPermissions(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	if _, ok := s.b.VHost(req.args[0]); !ok {
		return errorf(http.StatusNotFound, "no vhost '%s'", req.args[0])
	}
	return req.ok(s.permissions(func(p auth.Permission) bool { return p.VHost == req.args[0] }))
}

func (s *server) userPermissions(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	return req.ok(s.permissions(func(p auth.Permission) bool { return p.User == req.args[0] }))
}

func (s *server) getPermission(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	list := s.permissions(func(p auth.Permission) bool { return p.VHost == req.args[0] && p.User == req.args[1] })
	if len(list) == 0 {
		return errorf(http.StatusNotFound, "no permission for user '%s' in vhost '%s'", req.args[1], req.args[0])
	}
	return req.ok(list[0])
}

func (s *server) putPermission(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	var body struct {
		Configure *string `json:"configure"`
		Write     *string `json:"write"`
		Read      *string `json:"read"`
	}
	if err := req.decode(&body); err != nil {
		return err
	}
	if body.Configure == nil || body.Write == nil || body.Read == nil {
		return errorf(http.StatusBadRequest, "configure, write and read are required")
	}
	p := auth.Permission{VHost: req.args[0], User: req.args[1],
		Configure: permIn(*body.Configure), Write: permIn(*body.Write), Read: permIn(*body.Read)}
	if _, ok := s.b.VHost(p.VHost); !ok {
		return errorf(http.StatusNotFound, "no vhost '%s'", p.VHost)
	}
	for _, re := range []string{p.Configure, p.Write, p.Read} {
		if err := checkRegexp(re); err != nil {
			return err
		}
	}
	_, existed := s.auth.Permission(p.User, p.VHost)
	if err := s.auth.SetPermission(p); err != nil {
		return err
	}
	return req.created(!existed)
}

func (s *server) deletePermission(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	if err := s.auth.DeletePermission(req.args[1], req.args[0]); err != nil {
		return err
	}
	return req.noContent()
}

// ---- policies ----

func policyJSON(p router.Policy) map[string]any {
	return map[string]any{"vhost": p.VHost, "name": p.Name, "pattern": p.Pattern, "apply-to": p.ApplyTo,
		"priority": p.Priority, "definition": mapJSON(p.Definition)}
}

func (s *server) listPolicies(req *request) error {
	if err := req.requireTag("policymaker"); err != nil {
		return err
	}
	return s.listInScope(req, func(v *router.VHost, out []map[string]any) []map[string]any {
		for _, p := range v.Policies() {
			out = append(out, policyJSON(p))
		}
		return out
	})
}

func (s *server) getPolicy(req *request) error {
	if err := req.requireTag("policymaker"); err != nil {
		return err
	}
	v, err := s.vhost(req, req.args[0])
	if err != nil {
		return err
	}
	p, ok := v.Policy(req.args[1])
	if !ok {
		return errorf(http.StatusNotFound, "no policy '%s' in vhost '%s'", req.args[1], req.args[0])
	}
	return req.ok(policyJSON(p))
}

func (s *server) putPolicy(req *request) error {
	if err := req.requireTag("policymaker"); err != nil {
		return err
	}
	v, err := s.vhost(req, req.args[0])
	if err != nil {
		return err
	}
	var body struct {
		Pattern    *string        `json:"pattern"`
		Definition map[string]any `json:"definition"`
		Priority   json.Number    `json:"priority"`
		ApplyTo    string         `json:"apply-to"`
	}
	if err := req.decode(&body); err != nil {
		return err
	}
	if body.Pattern == nil {
		return errorf(http.StatusBadRequest, "pattern is required")
	}
	if body.Definition == nil {
		return errorf(http.StatusBadRequest, "definition is required")
	}
	prio := int64(0)
	if body.Priority != "" {
		if prio, err = body.Priority.Int64(); err != nil || prio < -1<<31 || prio > 1<<31-1 {
			return errorf(http.StatusBadRequest, "priority %s is not an integer", body.Priority)
		}
	}
	def, err := arguments("policy definition", body.Definition)
	if err != nil {
		return err
	}
	_, existed := v.Policy(req.args[1])
	err = v.PutPolicy(router.Policy{Name: req.args[1], Pattern: *body.Pattern, ApplyTo: body.ApplyTo, Priority: int(prio), Definition: def})
	if err != nil {
		return err
	}
	return req.created(!existed)
}

func (s *server) deletePolicy(req *request) error {
	if err := req.requireTag("policymaker"); err != nil {
		return err
	}
	v, err := s.vhost(req, req.args[0])
	if err != nil {
		return err
	}
	if err := v.DeletePolicy(req.args[1]); err != nil {
		return err
	}
	return req.noContent()
}

// ---- definitions ----

// vhostScoped are the definitions sections that belong to a vhost.
var vhostScoped = []string{"policies", "queues", "exchanges", "bindings"}

func (s *server) exportDefinitions(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	raw, err := s.b.ExportDefinitions()
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := unmarshal(raw, &doc); err != nil {
		return err
	}
	doc["rabbitmq_version"] = rabbitVersion
	doc["product_name"] = "epitaph"
	doc["product_version"] = s.version
	if perms, ok := doc["permissions"].([]any); ok {
		for _, p := range perms {
			if pm, ok := p.(map[string]any); ok {
				for _, k := range []string{"configure", "write", "read"} {
					if str, ok := pm[k].(string); ok {
						pm[k] = permOut(str)
					}
				}
			}
		}
	}
	if len(req.args) == 1 {
		vh := req.args[0]
		if _, ok := s.b.VHost(vh); !ok {
			return errorf(http.StatusNotFound, "no vhost '%s'", vh)
		}
		delete(doc, "users")
		delete(doc, "vhosts")
		delete(doc, "permissions")
		for _, sec := range vhostScoped {
			items, _ := doc[sec].([]any)
			kept := []any{}
			for _, it := range items {
				m, ok := it.(map[string]any)
				if !ok || m["vhost"] != vh {
					continue
				}
				delete(m, "vhost")
				kept = append(kept, m)
			}
			doc[sec] = kept
		}
	}
	if req.r.URL.Query().Has("download") {
		name := strings.Map(func(r rune) rune {
			if r == '"' || r == '\\' || r < 0x20 {
				return '_'
			}
			return r
		}, req.r.URL.Query().Get("download"))
		req.w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	}
	return req.ok(doc)
}

func (s *server) importDefinitions(req *request) error {
	if err := req.requireAdmin(); err != nil {
		return err
	}
	raw, err := s.definitionsBody(req)
	if err != nil {
		return err
	}
	var doc map[string]any
	if err := unmarshal(raw, &doc); err != nil {
		return err
	}
	if doc == nil {
		return errorf(http.StatusBadRequest, "definitions must be a JSON object")
	}
	if len(req.args) == 1 {
		vh := req.args[0]
		if _, ok := s.b.VHost(vh); !ok {
			return errorf(http.StatusNotFound, "no vhost '%s'", vh)
		}
		delete(doc, "users")
		delete(doc, "vhosts")
		delete(doc, "permissions")
		for _, sec := range vhostScoped {
			items, _ := doc[sec].([]any)
			for _, it := range items {
				if m, ok := it.(map[string]any); ok {
					m["vhost"] = vh
				}
			}
		}
	}
	if users, _ := doc["users"].([]any); len(users) > 0 {
		if err := s.ensureGuest(); err != nil {
			return err
		}
	}
	if perms, _ := doc["permissions"].([]any); len(perms) > 0 {
		for _, p := range perms {
			if pm, ok := p.(map[string]any); ok {
				for _, k := range []string{"configure", "write", "read"} {
					if str, ok := pm[k].(string); ok {
						pm[k] = permIn(str)
					}
				}
			}
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return errorf(http.StatusBadRequest, "definitions: %v", err)
	}
	if err := s.b.LoadDefinitions(out); err != nil {
		he := fromRouter(err)
		if he.status >= 500 {
			he = errorf(http.StatusBadRequest, "%s", he.reason)
		}
		return he
	}
	return req.noContent()
}

// definitionsBody reads a JSON body, or the "file" field of a multipart
// upload (the management UI's form).
func (s *server) definitionsBody(req *request) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(req.r.Header.Get("Content-Type"))
	if !strings.HasPrefix(mt, "multipart/") {
		return req.readBody()
	}
	req.r.Body = http.MaxBytesReader(req.w, req.r.Body, maxBody)
	if err := req.r.ParseMultipartForm(maxBody); err != nil {
		return nil, errorf(http.StatusBadRequest, "multipart body: %v", err)
	}
	f, _, err := req.r.FormFile("file")
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "multipart body without a 'file' field")
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "multipart body: %v", err)
	}
	return b, nil
}

// checkRegexp validates a permission pattern as the router compiles it.
func checkRegexp(re string) error {
	if _, err := regexp.Compile("^(?:" + re + ")"); err != nil {
		return errorf(http.StatusBadRequest, "invalid regular expression %q: %v", re, err)
	}
	return nil
}
