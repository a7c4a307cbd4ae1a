package amqpnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/management/dlops"
	"github.com/epitaph-mq/epitaph/router"
)

// Redrive tasks on the management node (epitaph's own paths: RabbitMQ has
// none). The request and response bodies are maps with the HTTP API's keys
// (string keys, AMQP values for JSON's): POST /redrives starts a task
// (201, or 200 with the report for a dry run), GET /redrives lists the
// tasks of the link's vhost, GET /redrives/{id} shows one, DELETE
// /redrives/{id} cancels it, DELETE /redrives/{id}/report removes an ended
// one (409 while it runs). The vhost is the connection's.

func (n *Node) redrives(r *request, seg []string) (string, any, error) {
	if n.redrive == nil {
		return "", nil, fail(statusNotFound, "redrive is not available")
	}
	vh := r.VHost.Name()
	if len(seg) == 1 {
		switch r.method {
		case "POST":
			return n.startRedrive(r)
		case "GET":
			var out []any
			for _, t := range n.redrive.List(func(v string) bool { return v == vh }) {
				out = append(out, taskValue(t))
			}
			if out == nil {
				out = []any{}
			}
			return statusOK, out, nil
		}
		return "", nil, fail(statusBadMethod, "method %s not allowed on /redrives (allowed: GET, POST)", r.method)
	}
	t, err := n.redrive.Get(seg[1])
	if err != nil || t.VHost != vh {
		return "", nil, fail(statusNotFound, "no redrive task '%s' in vhost '%s'", seg[1], vh)
	}
	switch r.method {
	case "GET":
		return statusOK, taskValue(t), nil
	case "DELETE":
		if err := forbidden(r.MayReadQueue(t.SourceQueue)); err != nil {
			return "", nil, err
		}
		t, err = n.redrive.Cancel(t.ID)
		if err != nil {
			return "", nil, fail(statusNotFound, "%v", err)
		}
		return statusOK, taskValue(t), nil
	}
	return "", nil, fail(statusBadMethod, "method %s not allowed on /redrives/{id} (allowed: GET, DELETE)", r.method)
}

func (n *Node) deleteRedrive(r *request, id string) (string, any, error) {
	if n.redrive == nil {
		return "", nil, fail(statusNotFound, "redrive is not available")
	}
	vh := r.VHost.Name()
	t, err := n.redrive.Get(id)
	if err != nil || t.VHost != vh {
		return "", nil, fail(statusNotFound, "no redrive task '%s' in vhost '%s'", id, vh)
	}
	if err := forbidden(r.MayReadQueue(t.SourceQueue)); err != nil {
		return "", nil, err
	}
	t, err = n.redrive.Delete(t.ID)
	switch {
	case errors.Is(err, dlops.ErrTaskRunning):
		return "", nil, fail(statusConflict, "%v", err)
	case err != nil:
		return "", nil, fail(statusNotFound, "%v", err)
	}
	return statusOK, taskValue(t), nil
}

func (n *Node) startRedrive(r *request) (string, any, error) {
	m, ok := r.body.(amqp10.Map)
	if !ok {
		return "", nil, fail(statusBadRequest, "the request body must be a map")
	}
	fields := map[string]any{}
	for _, kv := range m {
		k, ok := mapKeyString(kv.Key)
		if !ok {
			return "", nil, fail(statusBadRequest, "map keys must be strings")
		}
		fields[k] = jsonValue(kv.Value)
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		return "", nil, fail(statusBadRequest, "%v", err)
	}
	var body struct {
		SourceQueue string         `json:"source_queue"`
		Target      string         `json:"target"`
		TargetQueue string         `json:"target_queue"`
		Filter      map[string]any `json:"filter"`
		Rate        float64        `json:"rate"`
		Max         int64          `json:"max"`
		DryRun      bool           `json:"dry_run"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return "", nil, fail(statusBadRequest, "bad redrive request: %v", err)
	}
	ff := map[string]string{}
	for k, v := range body.Filter {
		switch x := v.(type) {
		case string:
			ff[k] = x
		case float64:
			ff[k] = fmt.Sprint(x)
		default:
			return "", nil, fail(statusBadRequest, "filter %q must be a string or a number", k)
		}
	}
	f, err := dlops.ParseFilter(ff)
	if err != nil {
		return "", nil, redriveError(err)
	}
	spec := dlops.Spec{VHost: r.VHost.Name(), SourceQueue: body.SourceQueue, Target: body.Target,
		TargetQueue: body.TargetQueue, Filter: f, Rate: body.Rate, Max: body.Max, DryRun: body.DryRun}
	t, err := n.redrive.Start(r.Operator, spec)
	if err != nil {
		return "", nil, redriveError(err)
	}
	if spec.DryRun {
		return statusOK, taskValue(t), nil
	}
	return statusCreated, taskValue(t), nil
}

func redriveError(err error) error {
	switch {
	case errors.Is(err, dlops.ErrBadRequest):
		return fail(statusBadRequest, "%s", strings.TrimPrefix(err.Error(), dlops.ErrBadRequest.Error()+": "))
	case errors.Is(err, router.ErrNotFound):
		return fail(statusNotFound, "%s", explain(err))
	}
	return routerError(err)
}

func mapKeyString(k any) (string, bool) {
	switch x := k.(type) {
	case string:
		return x, true
	case amqp10.Symbol:
		return string(x), true
	}
	return "", false
}

// jsonValue is an AMQP value as the JSON decoder would give it.
func jsonValue(v any) any {
	switch x := v.(type) {
	case amqp10.Symbol:
		return string(x)
	case amqp10.Map:
		out := map[string]any{}
		for _, kv := range x {
			if k, ok := mapKeyString(kv.Key); ok {
				out[k] = jsonValue(kv.Value)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValue(e)
		}
		return out
	}
	return v
}

// taskValue is a task as an AMQP map with the HTTP API's keys.
func taskValue(t dlops.Task) any {
	raw, err := json.Marshal(t)
	if err != nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	return amqpValue(v)
}

func amqpValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		m := make(amqp10.Map, 0, len(x))
		for _, k := range keys {
			m = append(m, amqp10.KV{Key: k, Value: amqpValue(x[k])})
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = amqpValue(e)
		}
		return out
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x)
		}
		return x
	}
	return v
}
