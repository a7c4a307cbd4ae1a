package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/epitaph-mq/epitaph/management"
	"github.com/epitaph-mq/epitaph/router"
)

// maxName is RabbitMQ's limit on queue and exchange names (bytes).
const maxName = 255

func checkName(kind, name string) error {
	if name == "" {
		return errorf(http.StatusBadRequest, "%s name is empty", kind)
	}
	if len(name) > maxName {
		return errorf(http.StatusBadRequest, "%s name is longer than %d bytes", kind, maxName)
	}
	return nil
}

// ---- queues ----

// queueJSON is RabbitMQ's queue object plus epitaph's dead-letter
// configuration and counters.
func (s *server) queueJSON(q *router.Queue) map[string]any {
	info := q.Info()
	var policy any
	if info.Policy != "" {
		policy = info.Policy
	}
	args := mapJSON(info.Arguments)
	if _, ok := args["x-queue-type"]; !ok {
		// RabbitMQ 4 records the queue type among the arguments
		// (rabbit_amqqueue:augment_declare_args), as definitions exports do.
		args["x-queue-type"] = string(info.Type)
	}
	out := map[string]any{
		"name": info.Name, "vhost": info.VHost, "type": string(info.Type),
		"durable": info.Durable, "auto_delete": info.AutoDelete, "exclusive": info.Exclusive,
		"arguments":                   args,
		"messages":                    info.Messages + info.MessagesUnacknowledged + info.MessagesDelayed,
		"messages_ready":              info.Messages,
		"messages_unacknowledged":     info.MessagesUnacknowledged,
		"message_bytes_ready":         info.MessageBytes,
		"consumers":                   info.Consumers,
		"consumer_credit":             info.ConsumerCredit,
		"policy":                      policy,
		"effective_policy_definition": mapJSON(info.EffectivePolicyDefinition),
		"state":                       "running",
		"node":                        s.node,
		"message_stats":               s.qrate.messageStats(q, info.Stats, time.Now()),
	}
	if dlx, ok := q.DeadLetterExchange(); ok {
		out["dead_letter_exchange"] = dlx
		if rk, ok := q.DeadLetterRoutingKey(); ok {
			out["dead_letter_routing_key"] = rk
		}
		out["dead_letter_strategy"] = q.DeadLetterStrategy()
	}
	if l := q.DeliveryLimit(); l >= 0 {
		out["delivery_limit"] = l
	}
	if info.Type == router.Quorum {
		// RabbitMQ 4.3's delayed retry fields; the times only while a
		// message is delayed.
		out["messages_delayed"] = info.MessagesDelayed
		out["delayed_retry"] = info.DelayedRetry
		if info.MessagesDelayed > 0 {
			out["next_delayed_at"] = info.NextDelayedAt
			out["last_delayed_at"] = info.LastDelayedAt
		}
	}
	out["dead_lettering"] = s.deadLetteringJSON(info.VHost, info.Name)
	return out
}

// deadLetteringJSON is a queue's dead-letter counters by reason (empty
// without a dead-letterer), as the queue and flow objects show them.
func (s *server) deadLetteringJSON(vhost, queue string) map[string]any {
	dl := map[string]any{}
	if s.dl != nil {
		for reason, c := range s.dl.QueueStats(vhost, queue) {
			dl[string(reason)] = map[string]uint64{
				"dead_lettered": c.DeadLettered, "dropped_no_dlx": c.DroppedNoDLX,
				"dropped_no_route": c.DroppedNoRoute, "dropped_cycle": c.DroppedCycle,
			}
		}
	}
	return dl
}

func (s *server) listQueues(req *request) error {
	return s.listInScope(req, func(v *router.VHost, out []map[string]any) []map[string]any {
		for _, q := range v.Queues() {
			out = append(out, s.queueJSON(q))
		}
		return out
	})
}

// listInScope answers one JSON list (empty, not null, when there is
// nothing) of what add appends for each vhost of the request's scope.
func (s *server) listInScope(req *request, add func(v *router.VHost, out []map[string]any) []map[string]any) error {
	vhosts, err := s.scope(req)
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, v := range vhosts {
		out = add(v, out)
	}
	return req.ok(out)
}

// scope returns the vhost named in the path, or every visible vhost.
func (s *server) scope(req *request) ([]*router.VHost, error) {
	if len(req.args) == 0 {
		return s.visibleVHosts(req), nil
	}
	v, err := s.vhost(req, req.args[0])
	if err != nil {
		return nil, err
	}
	return []*router.VHost{v}, nil
}

// queue resolves the path's vhost and queue.
func (s *server) queue(req *request) (*router.VHost, *router.Queue, error) {
	v, err := s.vhost(req, req.args[0])
	if err != nil {
		return nil, nil, err
	}
	q, ok := v.Queue(req.args[1])
	if !ok {
		return nil, nil, errorf(http.StatusNotFound, "no queue '%s' in vhost '%s'", req.args[1], req.args[0])
	}
	return v, q, nil
}

// queueWith is queue, and then the permission check may (a
// management.Operator method) on the queue.
func (s *server) queueWith(req *request, may func(management.Operator, string) error) (*router.VHost, *router.Queue, error) {
	v, q, err := s.queue(req)
	if err != nil {
		return nil, nil, err
	}
	if err := forbidden(may(s.operator(req, v), q.Name())); err != nil {
		return nil, nil, err
	}
	return v, q, nil
}

func (s *server) getQueue(req *request) error {
	_, q, err := s.queue(req)
	if err != nil {
		return err
	}
	return req.ok(s.queueJSON(q))
}

func (s *server) putQueue(req *request) error {
	v, err := s.vhost(req, req.args[0])
	if err != nil {
		return err
	}
	name := req.args[1]
	if err := checkName("queue", name); err != nil {
		return err
	}
	var body struct {
		Durable    *bool          `json:"durable"`
		AutoDelete bool           `json:"auto_delete"`
		Arguments  map[string]any `json:"arguments"`
		Type       string         `json:"type"`
		Node       string         `json:"node"`
	}
	if err := req.decode(&body); err != nil {
		return err
	}
	args, err := arguments("queue", body.Arguments)
	if err != nil {
		return err
	}
	vh := v.Name()
	op := s.operator(req, v)
	if err := forbidden(op.MayConfigureQueue(name)); err != nil {
		return err
	}
	if dlxArg, ok := args.Get("x-dead-letter-exchange"); ok {
		// dlx.md: "in addition to the usual configure permissions on the
		// declared queue, the user must have read permissions on that
		// queue and write permissions on the dead letter exchange."
		dlx, isStr := dlxArg.(string)
		if !isStr {
			return errorf(http.StatusBadRequest, "PRECONDITION_FAILED - invalid arg 'x-dead-letter-exchange' for queue '%s' in vhost '%s': must be a string", name, vh)
		}
		if err := forbidden(op.MayDeadLetterTo(name, dlx)); err != nil {
			return err
		}
	}
	durable := body.Durable == nil || *body.Durable
	_, created, err := v.DeclareQueue(router.QueueSpec{
		Name: name, Type: router.QueueType(body.Type), Durable: durable, AutoDelete: body.AutoDelete, Arguments: args,
	})
	if err != nil {
		return err
	}
	return req.created(created)
}

func (s *server) deleteQueue(req *request) error {
	v, q, err := s.queueWith(req, management.Operator.MayConfigureQueue)
	if err != nil {
		return err
	}
	query := req.r.URL.Query()
	if query.Get("if-empty") == "true" || query.Get("if-unused") == "true" {
		info := q.Info()
		if query.Get("if-empty") == "true" && info.Messages+info.MessagesUnacknowledged > 0 {
			return errorf(http.StatusBadRequest, "PRECONDITION_FAILED - %s is not empty", q)
		}
		if query.Get("if-unused") == "true" && info.Consumers > 0 {
			return errorf(http.StatusBadRequest, "PRECONDITION_FAILED - %s in use", q)
		}
	}
	if _, err := v.DeleteQueue(q.Name()); err != nil {
		return err
	}
	return req.noContent()
}

func (s *server) purgeQueue(req *request) error {
	_, q, err := s.queueWith(req, management.Operator.MayReadQueue)
	if err != nil {
		return err
	}
	q.Purge()
	return req.noContent()
}

func (s *server) queueBindings(req *request) error {
	v, q, err := s.queue(req)
	if err != nil {
		return err
	}
	return req.ok(bindingsJSON(v, func(b router.Binding) bool {
		return !b.DestinationIsExchange && b.Destination == q.Name()
	}))
}

// ---- exchanges ----

// exchangeName maps the URL name "amq.default" to the default exchange.
func exchangeName(name string) string {
	if name == "amq.default" {
		return ""
	}
	return name
}

func exchangeJSON(x router.ExchangeInfo) map[string]any {
	return map[string]any{
		"name": x.Name, "vhost": x.VHost, "type": x.Type, "durable": x.Durable, "auto_delete": x.AutoDelete,
		"internal": x.Internal, "arguments": mapJSON(x.Arguments), "user_who_performed_action": "",
	}
}

func (s *server) listExchanges(req *request) error {
	return s.listInScope(req, func(v *router.VHost, out []map[string]any) []map[string]any {
		for _, x := range v.Exchanges() {
			out = append(out, exchangeJSON(x))
		}
		return out
	})
}

func (s *server) getExchange(req *request) error {
	v, err := s.vhost(req, req.args[0])
	if err != nil {
		return err
	}
	x, ok := v.Exchange(exchangeName(req.args[1]))
	if !ok {
		return errorf(http.StatusNotFound, "no exchange '%s' in vhost '%s'", req.args[1], req.args[0])
	}
	return req.ok(exchangeJSON(x))
}

func (s *server) putExchange(req *request) error {
	v, err := s.vhost(req, req.args[0])
	if err != nil {
		return err
	}
	name := exchangeName(req.args[1])
	if len(name) > maxName {
		return errorf(http.StatusBadRequest, "exchange name is longer than %d bytes", maxName)
	}
	var body struct {
		Type       *string        `json:"type"`
		Durable    *bool          `json:"durable"`
		AutoDelete bool           `json:"auto_delete"`
		Internal   bool           `json:"internal"`
		Arguments  map[string]any `json:"arguments"`
	}
	if err := req.decode(&body); err != nil {
		return err
	}
	if body.Type == nil {
		return errorf(http.StatusBadRequest, "key_missing: type")
	}
	args, err := arguments("exchange", body.Arguments)
	if err != nil {
		return err
	}
	op := s.operator(req, v)
	if err := forbidden(op.MayConfigureExchange(name)); err != nil {
		return err
	}
	if ae, ok := args.Get("alternate-exchange"); ok {
		aeName, _ := ae.(string)
		if err := forbidden(op.MayUseAlternateExchange(name, aeName)); err != nil {
			return err
		}
	}
	created, err := v.DeclareExchange(router.ExchangeSpec{
		Name: name, Type: *body.Type, Durable: body.Durable == nil || *body.Durable,
		AutoDelete: body.AutoDelete, Internal: body.Internal, Arguments: args,
	})
	if err != nil {
		return err
	}
	return req.created(created)
}

// exchange resolves the path's vhost and the name of an existing exchange
// ("" for amq.default).
func (s *server) exchange(req *request) (*router.VHost, string, error) {
	v, err := s.vhost(req, req.args[0])
	if err != nil {
		return nil, "", err
	}
	name := exchangeName(req.args[1])
	if !v.HasExchange(name) {
		return nil, "", errorf(http.StatusNotFound, "no exchange '%s' in vhost '%s'", req.args[1], req.args[0])
	}
	return v, name, nil
}

func (s *server) deleteExchange(req *request) error {
	v, name, err := s.exchange(req)
	if err != nil {
		return err
	}
	if err := forbidden(s.operator(req, v).MayConfigureExchange(name)); err != nil {
		return err
	}
	if req.r.URL.Query().Get("if-unused") == "true" {
		for _, b := range v.Bindings() {
			if b.Source == name && name != "" {
				return errorf(http.StatusBadRequest, "PRECONDITION_FAILED - exchange '%s' in vhost '%s' in use", name, v.Name())
			}
		}
	}
	if err := v.DeleteExchange(name); err != nil {
		return err
	}
	return req.noContent()
}

func (s *server) exchangeBindings(source bool) handlerFunc {
	return func(req *request) error {
		v, name, err := s.exchange(req)
		if err != nil {
			return err
		}
		return req.ok(bindingsJSON(v, func(b router.Binding) bool {
			if source {
				return b.Source == name
			}
			return b.DestinationIsExchange && b.Destination == name
		}))
	}
}

// ---- bindings ----

// propsKey is RabbitMQ's properties_key: the percent-encoded routing
// key ("~" when empty), followed by "~" and a hash of the arguments when
// there are any.
func propsKey(b router.Binding) string {
	key := strings.ReplaceAll(url.PathEscape(b.Key), "~", "%7E")
	if len(b.Arguments) == 0 {
		if b.Key == "" {
			return "~"
		}
		return key
	}
	enc, _ := json.Marshal(mapJSON(b.Arguments)) // map keys are sorted by encoding/json
	sum := sha256.Sum256(enc)
	return key + "~" + base64.RawURLEncoding.EncodeToString(sum[:12])
}

func bindingJSON(vhost string, b router.Binding) map[string]any {
	dt := "queue"
	if b.DestinationIsExchange {
		dt = "exchange"
	}
	return map[string]any{
		"source": b.Source, "vhost": vhost, "destination": b.Destination, "destination_type": dt,
		"routing_key": b.Key, "arguments": mapJSON(b.Arguments), "properties_key": propsKey(b),
	}
}

func bindingsJSON(v *router.VHost, keep func(router.Binding) bool) []map[string]any {
	out := []map[string]any{}
	for _, b := range v.Bindings() {
		if keep(b) {
			out = append(out, bindingJSON(v.Name(), b))
		}
	}
	return out
}

func (s *server) listBindings(req *request) error {
	return s.listInScope(req, func(v *router.VHost, out []map[string]any) []map[string]any {
		return append(out, bindingsJSON(v, func(router.Binding) bool { return true })...)
	})
}

// endpoints resolves the path's vhost, source exchange and destination,
// checking that both exist.
func (s *server) endpoints(req *request, toExchange bool) (*router.VHost, string, string, error) {
	v, err := s.vhost(req, req.args[0])
	if err != nil {
		return nil, "", "", err
	}
	src, dst := exchangeName(req.args[1]), req.args[2]
	if toExchange {
		dst = exchangeName(dst)
	}
	if !v.HasExchange(src) {
		return nil, "", "", errorf(http.StatusNotFound, "no exchange '%s' in vhost '%s'", req.args[1], v.Name())
	}
	if toExchange && !v.HasExchange(dst) {
		return nil, "", "", errorf(http.StatusNotFound, "no exchange '%s' in vhost '%s'", req.args[2], v.Name())
	}
	if _, ok := v.Queue(dst); !toExchange && !ok {
		return nil, "", "", errorf(http.StatusNotFound, "no queue '%s' in vhost '%s'", dst, v.Name())
	}
	return v, src, dst, nil
}

func (s *server) bindingsBetween(toExchange bool) handlerFunc {
	return func(req *request) error {
		v, src, dst, err := s.endpoints(req, toExchange)
		if err != nil {
			return err
		}
		return req.ok(bindingsJSON(v, func(b router.Binding) bool {
			return b.Source == src && b.Destination == dst && b.DestinationIsExchange == toExchange
		}))
	}
}

func (s *server) postBinding(toExchange bool) handlerFunc {
	return func(req *request) error {
		v, src, dst, err := s.endpoints(req, toExchange)
		if err != nil {
			return err
		}
		var body struct {
			RoutingKey *string        `json:"routing_key"`
			Arguments  map[string]any `json:"arguments"`
		}
		if err := req.decode(&body); err != nil {
			return err
		}
		args, err := arguments("binding", body.Arguments)
		if err != nil {
			return err
		}
		if err := forbidden(s.operator(req, v).MayBind(src, dst, toExchange)); err != nil {
			return err
		}
		b := router.Binding{Source: src, Destination: dst, DestinationIsExchange: toExchange, Arguments: args}
		if body.RoutingKey != nil {
			b.Key = *body.RoutingKey
		}
		if err := v.Bind(b); err != nil {
			return err
		}
		kind := "q"
		if toExchange {
			kind = "e"
		}
		req.w.Header().Set("Location", "/api/bindings/"+url.PathEscape(v.Name())+"/e/"+url.PathEscape(src)+"/"+kind+"/"+
			url.PathEscape(dst)+"/"+propsKey(b))
		req.w.WriteHeader(http.StatusCreated)
		return nil
	}
}

// findBinding finds the binding whose properties_key is the path's last segment.
func (s *server) findBinding(req *request, toExchange bool) (*router.VHost, router.Binding, error) {
	v, src, dst, err := s.endpoints(req, toExchange)
	if err != nil {
		return nil, router.Binding{}, err
	}
	props := req.args[3]
	for _, b := range v.Bindings() {
		if b.Source != src || b.Destination != dst || b.DestinationIsExchange != toExchange {
			continue
		}
		pk := propsKey(b)
		if un, err := url.PathUnescape(pk); (err == nil && un == props) || pk == props {
			return v, b, nil
		}
	}
	return nil, router.Binding{}, errorf(http.StatusNotFound, "no binding '%s' from exchange '%s' to '%s' in vhost '%s'", props, req.args[1], req.args[2], v.Name())
}

func (s *server) getBinding(toExchange bool) handlerFunc {
	return func(req *request) error {
		v, b, err := s.findBinding(req, toExchange)
		if err != nil {
			return err
		}
		return req.ok(bindingJSON(v.Name(), b))
	}
}

func (s *server) deleteBinding(toExchange bool) handlerFunc {
	return func(req *request) error {
		v, b, err := s.findBinding(req, toExchange)
		if err != nil {
			return err
		}
		if err := forbidden(s.operator(req, v).MayBind(b.Source, b.Destination, toExchange)); err != nil {
			return err
		}
		if err := v.Unbind(b); err != nil {
			return err
		}
		return req.noContent()
	}
}
