package deadletter

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/epitaph-mq/epitaph/dlevents"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/telemetry"
	"github.com/epitaph-mq/epitaph/value"
)

// Dead-letter events (package dlevents): every message that dies is
// published as one event once its fate is known (dead-lettered, dropped,
// or retained for a retry), after its copies are enqueued, so that a
// subscriber that sees the event finds the copy in its targets. Nothing
// of this runs while nobody listens: forward asks Hub.Active (one atomic
// load) and builds no event otherwise.

// Events returns the hub the DeadLetterer publishes its events to (nil
// when it has none).
func (d *DeadLetterer) Events() *dlevents.Hub { return d.events }

// newEvent starts the event of dm's death in src at t.
func newEvent(src *router.Queue, dm *router.Dead, t time.Time) *dlevents.Event {
	e := &dlevents.Event{Time: t, VHost: src.VHost().Name(), Queue: src.Name(), QueueType: string(src.Type()),
		Reason: string(dm.Reason), Strategy: StrategyAtMostOnce}
	if dm.Retained {
		e.Strategy = StrategyAtLeastOnce
	}
	if dm.Error != nil {
		e.ErrorCondition, e.ErrorDescription = dm.Error.Condition, dm.Error.Description
	}
	if dm.Msg.Container != nil {
		if p, err := dm.Msg.Container.Properties(); err == nil && p.MessageID != nil {
			e.MessageID, e.HasMessageID = messageIDText(p.MessageID), true
		}
	}
	return e
}

// messageIDText writes a message-id (string, binary, ulong or UUID) as
// text.
func messageIDText(id any) string {
	switch v := id.(type) {
	case string:
		return v
	case []byte:
		return hex.EncodeToString(v)
	case uint64:
		return strconv.FormatUint(v, 10)
	case value.UUID:
		b := v[:]
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	}
	return fmt.Sprint(id)
}

// queueNames are the names of qs, for an event.
func queueNames(qs []*router.Queue) []string {
	if len(qs) == 0 {
		return nil
	}
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.Name()
	}
	return out
}

// enqueueReporting enqueues cp into each of targets one by one, reporting
// which took it and which refused it (overflow, deleted): the event path,
// where the batched EnqueueBatch would not tell.
func (d *DeadLetterer) enqueueReporting(src *router.Queue, cp *router.Message, targets []*router.Queue) (took, refused []string) {
	for _, q := range targets {
		if q.Enqueue(cp).Kind == router.Accepted {
			took = append(took, q.Name())
		} else {
			refused = append(refused, q.Name())
			d.copiesRefused(src, q, 1)
		}
	}
	return took, refused
}

// outcomesSplit splits the targets of a ForwardDead by their outcome.
func outcomesSplit(targets []*router.Queue, outcomes []router.Outcome) (took, refused []string) {
	for i, q := range targets {
		if i < len(outcomes) && outcomes[i].Kind == router.Accepted {
			took = append(took, q.Name())
		} else {
			refused = append(refused, q.Name())
		}
	}
	return took, refused
}

// eventCause is the event's drop cause for a notForwarded cause (a
// telemetry.Drop* value, or whyRejected).
func eventCause(cause string) string {
	switch cause {
	case telemetry.DropNoDLX:
		return dlevents.CauseNoDLX
	case telemetry.DropNoRoute:
		return dlevents.CauseNoRoute
	case telemetry.DropCycle:
		return dlevents.CauseCycle
	}
	return dlevents.CauseRejected
}
