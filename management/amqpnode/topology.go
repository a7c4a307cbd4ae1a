package amqpnode

import (
	"cmp"
	"encoding/base64"
	"errors"
	"hash/fnv"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/router"
)

// ---- exchanges ----

// exchangeBody is a decoded PUT /exchanges/{e} body.
type exchangeBody struct {
	typ                           string
	durable, autoDelete, internal bool
	args                          amqp10.Map
}

// decodeExchange decodes an exchange declaration (decode_exchange):
// type (utf8, default direct), durable (default true), auto_delete,
// internal, arguments; any other property is a 400.
func decodeExchange(body any) (exchangeBody, error) {
	x := exchangeBody{typ: router.ExchangeDirect, durable: true}
	m, err := bodyMap(body, "exchange")
	if err != nil {
		return x, err
	}
	for _, kv := range m {
		k, _ := kv.Key.(string)
		b, isBool := kv.Value.(bool)
		s, isStr := kv.Value.(string)
		switch {
		case k == "durable" && isBool:
			x.durable = b
		case k == "auto_delete" && isBool:
			x.autoDelete = b
		case k == "internal" && isBool:
			x.internal = b
		case k == "type" && isStr:
			x.typ = s
		case k == "arguments":
			if x.args, err = arguments(kv.Value); err != nil {
				return x, err
			}
		default:
			return x, fail(statusBadRequest, "bad exchange property %v: %v", kv.Key, kv.Value)
		}
	}
	return x, nil
}

// declareExchange: PUT /exchanges/{e} → 204 + null, new or equivalent;
// 409 when not equivalent; 403 for the default exchange, the amq. prefix
// (unless redeclaring an existing standard exchange equivalently) or
// without configure permission; 400 for a bad type, body or name.
func (n *Node) declareExchange(r *request, name string) (string, any, error) {
	body, err := decodeExchange(r.body)
	if err != nil {
		return "", nil, err
	}
	if err := checkDefaultExchange(name); err != nil {
		return "", nil, err
	}
	if err := forbidden(r.MayConfigureExchange(name)); err != nil {
		return "", nil, err
	}
	cur, exists := r.VHost.Exchange(name)
	if !exists {
		if err := checkName(name); err != nil {
			return "", nil, err
		}
		if err := checkReserved("exchange", name, r.VHost.Name()); err != nil {
			return "", nil, err
		}
	} else if strings.HasPrefix(name, "amq.") {
		// the router refuses every amq. name; RabbitMQ checks an existing
		// standard exchange for equivalence instead
		if !exchangeEquivalent(cur.ExchangeSpec, body) {
			return "", nil, fail(statusConflict, "inequivalent arg for exchange '%s' in vhost '%s'", name, r.VHost.Name())
		}
		return statusNoContent, nil, nil
	}
	_, err = r.VHost.DeclareExchange(router.ExchangeSpec{
		Name: name, Type: body.typ, Durable: body.durable, AutoDelete: body.autoDelete,
		Internal: body.internal, Arguments: body.args,
	})
	if err != nil {
		return "", nil, routerError(err)
	}
	return statusNoContent, nil, nil
}

func exchangeEquivalent(cur router.ExchangeSpec, x exchangeBody) bool {
	return cur.Type == x.typ && cur.Durable == x.durable && cur.AutoDelete == x.autoDelete &&
		cur.Internal == x.internal && len(cur.Arguments) == 0 && len(x.args) == 0
}

// deleteExchange: DELETE /exchanges/{e} → 204 + null, also when the
// exchange does not exist; 403 for the default exchange, amq. names or
// without configure permission.
func (n *Node) deleteExchange(r *request, name string) (string, any, error) {
	if err := checkName(name); err != nil {
		return "", nil, err
	}
	if err := checkDefaultExchange(name); err != nil {
		return "", nil, err
	}
	if err := checkReserved("exchange", name, r.VHost.Name()); err != nil {
		return "", nil, err
	}
	if err := forbidden(r.MayConfigureExchange(name)); err != nil {
		return "", nil, err
	}
	if err := r.VHost.DeleteExchange(name); err != nil && !errors.Is(err, router.ErrNotFound) {
		return "", nil, routerError(err)
	}
	return statusNoContent, nil, nil
}

// ---- bindings ----

// bindingBody is a decoded POST /bindings body.
type bindingBody struct {
	source, destination, key string
	toExchange, hasDest      bool
	args                     amqp10.Map
}

// decodeBinding decodes a binding (decode_binding): source,
// destination_queue or destination_exchange, binding_key (utf8) and
// arguments; any other field is a 400.
func decodeBinding(body any) (bindingBody, error) {
	var b bindingBody
	m, err := bodyMap(body, "binding")
	if err != nil {
		return b, err
	}
	hasSource := false
	for _, kv := range m {
		k, _ := kv.Key.(string)
		s, isStr := kv.Value.(string)
		switch {
		case k == "source" && isStr:
			b.source, hasSource = s, true
		case k == "destination_queue" && isStr && !b.hasDest:
			b.destination, b.hasDest = s, true
		case k == "destination_exchange" && isStr && !b.hasDest:
			b.destination, b.hasDest, b.toExchange = s, true, true
		case k == "binding_key" && isStr:
			b.key = s
		case k == "arguments":
			if b.args, err = arguments(kv.Value); err != nil {
				return b, err
			}
		default:
			return b, fail(statusBadRequest, "bad binding field %v: %v", kv.Key, kv.Value)
		}
	}
	if !hasSource || !b.hasDest {
		return b, fail(statusBadRequest, "a binding needs a source and one of destination_queue or destination_exchange")
	}
	return b, nil
}

// bindingChecks is binding_checks: no default exchange as source or
// destination (403), no CR/LF in the names (400), write on the
// destination and read on the source (403).
func bindingChecks(r *request, b bindingBody) error {
	if err := checkDefaultExchange(b.source); err != nil {
		return err
	}
	if b.toExchange {
		if err := checkDefaultExchange(b.destination); err != nil {
			return err
		}
	}
	for _, name := range []string{b.source, b.destination} {
		if err := checkName(name); err != nil {
			return err
		}
	}
	return forbidden(r.MayBind(b.source, b.destination, b.toExchange))
}

// bind: POST /bindings → 204 + null; a missing source or destination is a
// 400, as RabbitMQ's binding_action errors are.
func (n *Node) bind(r *request) (string, any, error) {
	b, err := decodeBinding(r.body)
	if err != nil {
		return "", nil, err
	}
	if err := bindingChecks(r, b); err != nil {
		return "", nil, err
	}
	err = r.VHost.Bind(router.Binding{Source: b.source, Destination: b.destination,
		DestinationIsExchange: b.toExchange, Key: b.key, Arguments: b.args})
	if err != nil {
		if errors.Is(err, router.ErrAccessRefused) {
			return "", nil, routerError(err)
		}
		return "", nil, fail(statusBadRequest, "%s", explain(err))
	}
	return statusNoContent, nil, nil
}

// bindingSegment is RabbitMQ's binding path segment: source,
// destination kind and name, key (percent-encoded) and the arguments hash
// (URL-safe base64).
var bindingSegment = regexp.MustCompile(`^src=([0-9A-Za-z\-._~%]+);dst([eq])=([0-9A-Za-z\-._~%]+);key=([0-9A-Za-z\-._~%]*);args=([0-9A-Za-z\-_]*)$`)

// unbind: DELETE /bindings/src=…;dstq=…;key=…;args=… → 204 + null, also
// when nothing matched. An empty args= (which the official client always
// sends, even for bindings made with arguments) removes every binding with
// that source, destination and key whatever its arguments; a non-empty
// hash (from a GET /bindings location) removes the bindings whose
// arguments have that hash.
func (n *Node) unbind(r *request, segment string) (string, any, error) {
	sub := bindingSegment.FindStringSubmatch(segment)
	if sub == nil {
		return "", nil, fail(statusBadRequest, "bad binding path segment '%s'", segment)
	}
	var dec [3]string
	for i, s := range []string{sub[1], sub[3], sub[4]} {
		d, err := url.PathUnescape(s)
		if err != nil {
			return "", nil, fail(statusBadRequest, "bad binding path segment '%s': %v", segment, err)
		}
		dec[i] = d
	}
	b := bindingBody{source: dec[0], destination: dec[1], key: dec[2], toExchange: sub[2] == "e", hasDest: true}
	hash := sub[5]
	if err := bindingChecks(r, b); err != nil {
		return "", nil, err
	}
	for _, o := range r.VHost.Bindings() {
		if o.Source != b.source || o.Destination != b.destination || o.DestinationIsExchange != b.toExchange ||
			o.Key != b.key || (hash != "" && argsHash(o.Arguments) != hash) {
			continue
		}
		if err := r.VHost.Unbind(o); err != nil && !errors.Is(err, router.ErrNotFound) {
			return "", nil, routerError(err)
		}
	}
	return statusNoContent, nil, nil
}

// listBindings: GET /bindings?src=…&dstq=…|dste=…&key=… → 200 + a list of
// binding maps (source, destination_queue|destination_exchange,
// binding_key, arguments, location). RabbitMQ checks no permission here
// (an authorisation gap: anyone may list any bindings); epitaph requires
// read on the source exchange and on the destination.
func (n *Node) listBindings(r *request) (string, any, error) {
	q := r.query
	if q == nil || !q.Has("src") || !q.Has("key") {
		return "", nil, fail(statusBadRequest, "GET /bindings needs the query parameters src, key and dstq or dste")
	}
	b := bindingBody{source: q.Get("src"), key: q.Get("key")}
	switch {
	case q.Has("dste"):
		b.destination, b.toExchange = q.Get("dste"), true
	case q.Has("dstq"):
		b.destination = q.Get("dstq")
	default:
		return "", nil, fail(statusBadRequest, "missing 'dste' or 'dstq' in query: %s", q.Encode())
	}
	if err := forbidden(r.MayListBindings(b.source, b.destination, b.toExchange)); err != nil {
		return "", nil, err
	}
	out := amqp10.List{}
	for _, o := range r.VHost.Bindings() {
		if o.Source != b.source || o.Destination != b.destination || o.DestinationIsExchange != b.toExchange || o.Key != b.key {
			continue
		}
		out = append(out, bindingMap(o))
	}
	return statusOK, out, nil
}

// bindingMap encodes a binding as RabbitMQ's encode_bindings does.
func bindingMap(b router.Binding) amqp10.Map {
	dst, dstChar := "destination_queue", "q"
	if b.DestinationIsExchange {
		dst, dstChar = "destination_exchange", "e"
	}
	args := rabbitArguments(b.Arguments, true) // RabbitMQ keeps binding arguments sorted
	loc := "/bindings/src=" + quote(b.Source) + ";dst" + dstChar + "=" + quote(b.Destination) +
		";key=" + quote(b.Key) + ";args=" + argsHash(b.Arguments)
	return amqp10.Map{
		{Key: "source", Value: b.Source},
		{Key: dst, Value: b.Destination},
		{Key: "binding_key", Value: b.Key},
		{Key: "arguments", Value: args},
		{Key: "location", Value: loc},
	}
}

// quote percent-encodes everything but the unreserved characters
// A-Z a-z 0-9 - . _ ~ (uri_string:quote).
func quote(s string) string {
	const hex = "0123456789ABCDEF"
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			sb.WriteByte(c)
			continue
		}
		sb.WriteByte('%')
		sb.WriteByte(hex[c>>4])
		sb.WriteByte(hex[c&15])
	}
	return sb.String()
}

// argsHash identifies binding arguments in a location: "" for none,
// otherwise the URL-safe unpadded base64 of a 32-bit FNV-1a hash of the
// arguments sorted by key (RabbitMQ uses erlang:phash2, which clients
// treat as opaque).
func argsHash(args amqp10.Map) string {
	if len(args) == 0 {
		return ""
	}
	sorted := slices.Clone(args)
	slices.SortStableFunc(sorted, func(a, b amqp10.KV) int {
		ka, _ := stringArg(a.Key)
		kb, _ := stringArg(b.Key)
		return cmp.Compare(ka, kb)
	})
	enc, err := amqp10.AppendMap(nil, sorted)
	if err != nil {
		return "unencodable"
	}
	h := fnv.New32a()
	_, _ = h.Write(enc)
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
