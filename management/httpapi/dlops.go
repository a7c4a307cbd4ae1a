package httpapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/management/dlops"
	"github.com/epitaph-mq/epitaph/router"
)

// dlopsError maps a dlops error onto the API's statuses: bad input 400, a
// missing task 404, the router's sentinels as everywhere else.
func dlopsError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, dlops.ErrBadRequest):
		return errorf(http.StatusBadRequest, "%s", strings.TrimPrefix(err.Error(), dlops.ErrBadRequest.Error()+": "))
	case errors.Is(err, dlops.ErrTaskNotFound):
		return errorf(http.StatusNotFound, "%s", err.Error())
	case errors.Is(err, dlops.ErrTaskRunning):
		return errorf(http.StatusConflict, "%s", err.Error())
	}
	return fromRouter(err)
}

// peekQueue is GET /api/queues/{vhost}/{queue}/peek: a page of the queue's
// ready messages matching the filters, nothing acquired.
func (s *server) peekQueue(req *request) error {
	v, q, err := s.queue(req)
	if err != nil {
		return err
	}
	if err := forbidden(s.operator(req, v).MayReadQueue(q.Name())); err != nil {
		return err
	}
	query := req.r.URL.Query()
	pr := dlops.PeekRequest{Count: dlops.DefaultPeekCount}
	fields := map[string]string{}
	for k, vs := range query {
		val := vs[len(vs)-1]
		switch k {
		case "position":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return errorf(http.StatusBadRequest, "position must be a non-negative integer, not %q", val)
			}
			pr.Position = n
		case "count":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > dlops.MaxPeekCount {
				return errorf(http.StatusBadRequest, "count must be an integer between 1 and %d, not %q", dlops.MaxPeekCount, val)
			}
			pr.Count = n
		default:
			fields[k] = val
		}
	}
	if pr.Filter, err = dlops.ParseFilter(fields); err != nil {
		return dlopsError(err)
	}
	page, err := dlops.Peek(q, pr, s.peekMaxScan, s.filterLimits)
	if err != nil {
		return dlopsError(err)
	}
	msgs := make([]map[string]any, len(page.Messages))
	for i, bm := range page.Messages {
		msgs[i] = peekJSON(bm)
	}
	return req.ok(map[string]any{
		"queue": q.Name(), "vhost": v.Name(), "depth": page.Depth, "delayed": page.Delayed,
		"messages": msgs, "next_position": page.Next,
	})
}

// peekJSON renders one browsed message in the contract's shape.
func peekJSON(bm router.BrowsedMessage) map[string]any {
	m := bm.Msg
	wire := amqp10Wire(m)
	props := map[string]any{}
	for _, k := range []string{"message_id", "user_id", "to", "subject", "reply_to", "correlation_id", "content_type",
		"content_encoding", "absolute_expiry_time", "creation_time", "group_id", "group_sequence", "reply_to_group_id"} {
		props[k] = nil
	}
	appProps := map[string]any{}
	if wire != nil {
		if p, err := wire.Properties(); err == nil && p != nil {
			peekProperties(props, p)
		}
		if ap, err := wire.ApplicationProperties(); err == nil {
			for k, v := range mapJSON(ap) {
				appProps[k] = v
			}
		}
	}
	payload := payloadOf(wire)
	out := map[string]any{
		"position":               bm.Position,
		"message_id":             props["message_id"],
		"redelivered":            bm.Redelivered,
		"delivery_count":         bm.DeliveryCount,
		"properties":             props,
		"application_properties": appProps,
		"annotations":            mapJSON(bm.Annotations),
		"redrive_count":          dlops.RedriveCount(m.Anns),
		"body_size":              len(payload),
		"exchange":               m.Exchange,
		"routing_keys":           nonNilStrings(m.RoutingKeys),
		"durable":                m.Header.Durable,
		// A delayed message (quorum delayed retry) shows when it becomes
		// ready again; a ready one null.
		"delivery_time": nil,
	}
	if bm.DeliveryTime != 0 {
		out["delivery_time"] = timeJSON(amqp10.Timestamp(bm.DeliveryTime))
	}
	if utf8.Valid(payload) {
		out["body"], out["body_encoding"] = string(payload), "text"
	} else {
		out["body"], out["body_encoding"] = base64.StdEncoding.EncodeToString(payload), "base64"
	}
	deaths := []map[string]any{}
	if h, ok := annotations.HistoryOf(m.Anns); ok {
		for _, d := range h.Deaths {
			dj := deathJSON(d)
			if !d.HasTTL {
				dj["ttl"] = nil
			}
			deaths = append(deaths, dj)
		}
		out["first_death"] = placeJSON(h.First)
		out["last_death"] = placeJSON(h.Last)
		if h.LastError != nil {
			out["last_death_error"] = map[string]string{"condition": h.LastError.Condition, "description": h.LastError.Description}
		}
	}
	out["deaths"] = deaths
	return out
}

// peekProperties fills the AMQP 1.0 properties under their snake_case
// names.
func peekProperties(props map[string]any, p *amqp10.Properties) {
	if p.MessageID != nil {
		props["message_id"] = valueJSON(p.MessageID)
	}
	if p.CorrelationID != nil {
		props["correlation_id"] = valueJSON(p.CorrelationID)
	}
	if p.UserID != nil {
		props["user_id"] = string(p.UserID)
	}
	for k, v := range map[string]*string{"to": p.To, "subject": p.Subject, "reply_to": p.ReplyTo, "group_id": p.GroupID, "reply_to_group_id": p.ReplyToGroupID} {
		if v != nil {
			props[k] = *v
		}
	}
	if p.ContentType != nil {
		props["content_type"] = string(*p.ContentType)
	}
	if p.ContentEncoding != nil {
		props["content_encoding"] = string(*p.ContentEncoding)
	}
	if p.CreationTime != nil {
		props["creation_time"] = timeJSON(*p.CreationTime)
	}
	if p.AbsoluteExpiryTime != nil {
		props["absolute_expiry_time"] = timeJSON(*p.AbsoluteExpiryTime)
	}
	if p.GroupSequence != nil {
		props["group_sequence"] = *p.GroupSequence
	}
}

// redriveBody is POST /api/redrives's body.
type redriveBody struct {
	VHost       string                     `json:"vhost"`
	SourceQueue string                     `json:"source_queue"`
	Target      string                     `json:"target"`
	TargetQueue string                     `json:"target_queue"`
	Filter      map[string]json.RawMessage `json:"filter"`
	Rate        json.Number                `json:"rate"`
	Max         json.Number                `json:"max"`
	DryRun      bool                       `json:"dry_run"`
}

// startRedrive is POST /api/redrives.
func (s *server) startRedrive(req *request) error {
	if s.redrives == nil {
		return errorf(http.StatusNotFound, "redrive is not available")
	}
	var body redriveBody
	if err := req.decode(&body); err != nil {
		return err
	}
	spec := dlops.Spec{VHost: body.VHost, SourceQueue: body.SourceQueue, Target: body.Target,
		TargetQueue: body.TargetQueue, DryRun: body.DryRun}
	if spec.VHost == "" {
		spec.VHost = "/"
	}
	if body.Rate != "" {
		r, err := body.Rate.Float64()
		if err != nil {
			return errorf(http.StatusBadRequest, "rate must be a number of messages per second, not %q", body.Rate)
		}
		spec.Rate = r
	}
	if body.Max != "" {
		n, err := body.Max.Int64()
		if err != nil || n < 0 {
			return errorf(http.StatusBadRequest, "max must be a non-negative integer, not %q", body.Max)
		}
		spec.Max = n
	}
	fields := map[string]string{}
	for k, raw := range body.Filter {
		var str string
		if err := json.Unmarshal(raw, &str); err == nil {
			fields[k] = str
			continue
		}
		var num json.Number
		if err := json.Unmarshal(raw, &num); err == nil {
			fields[k] = num.String()
			continue
		}
		return errorf(http.StatusBadRequest, "filter %q must be a string or a number", k)
	}
	var err error
	if spec.Filter, err = dlops.ParseFilter(fields); err != nil {
		return dlopsError(err)
	}
	v, err := s.vhost(req, spec.VHost)
	if err != nil {
		return err
	}
	t, err := s.redrives.Start(s.operator(req, v), spec)
	if err != nil {
		return dlopsError(err)
	}
	if spec.DryRun {
		return req.ok(t)
	}
	writeJSON(req.w, http.StatusCreated, t)
	return nil
}

// listRedrives is GET /api/redrives: the tasks of the vhosts the user may
// see.
func (s *server) listRedrives(req *request) error {
	if s.redrives == nil {
		return req.ok([]any{})
	}
	visible := map[string]bool{}
	for _, v := range s.visibleVHosts(req) {
		visible[v.Name()] = true
	}
	return req.ok(s.redrives.List(func(vh string) bool { return visible[vh] }))
}

// redriveTask finds the task of the path, visible to the user.
func (s *server) redriveTask(req *request) (dlops.Task, error) {
	if s.redrives == nil {
		return dlops.Task{}, errorf(http.StatusNotFound, "no redrive task '%s'", req.args[0])
	}
	t, err := s.redrives.Get(req.args[0])
	if err != nil {
		return t, dlopsError(err)
	}
	if _, err := s.vhost(req, t.VHost); err != nil {
		return t, err
	}
	return t, nil
}

// getRedrive is GET /api/redrives/{id}.
func (s *server) getRedrive(req *request) error {
	t, err := s.redriveTask(req)
	if err != nil {
		return err
	}
	return req.ok(t)
}

// cancelRedrive is DELETE /api/redrives/{id}: it needs read on the
// task's source queue, as starting it did.
func (s *server) cancelRedrive(req *request) error {
	t, err := s.redriveTaskToChange(req)
	if err != nil {
		return err
	}
	t, err = s.redrives.Cancel(t.ID)
	if err != nil {
		return dlopsError(err)
	}
	return req.ok(t)
}

// deleteRedrive is DELETE /api/redrives/{id}/report: it removes an ended
// task and its report (409 for a running one: cancel it first), with read
// on the task's source queue, as cancelling needs.
func (s *server) deleteRedrive(req *request) error {
	t, err := s.redriveTaskToChange(req)
	if err != nil {
		return err
	}
	t, err = s.redrives.Delete(t.ID)
	if err != nil {
		return dlopsError(err)
	}
	return req.ok(t)
}

// redriveTaskToChange is the request's task, if its user may read the
// task's source queue (what cancelling and deleting a task need).
func (s *server) redriveTaskToChange(req *request) (dlops.Task, error) {
	t, err := s.redriveTask(req)
	if err != nil {
		return t, err
	}
	v, err := s.vhost(req, t.VHost)
	if err != nil {
		return t, err
	}
	return t, forbidden(s.operator(req, v).MayReadQueue(t.SourceQueue))
}
