package router

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

func TestDropHead(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			e := newEnv(t)
			q := e.queue(t, "q", typ, "x-max-length", int64(2))
			publishN(t, e, "q", 4)
			assert.Equal(t, 2, q.Len())
			assert.Equal(t, []string{"m1:maxlen", "m2:maxlen"}, e.dl.bodies())
			_, c := subscribe(t, q, 10)
			assert.Equal(t, []string{"m3", "m4"}, c.bodies())
		})
	}
}

func TestDropHeadBytes(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-length-bytes", int64(10))
	e.publish(t, "", msg("aaaa", "q"))
	e.publish(t, "", msg("bbbb", "q"))
	e.publish(t, "", msg("cccc", "q"))
	assert.Equal(t, 2, q.Len())
	assert.Equal(t, int64(8), q.Info().MessageBytes)
	assert.Equal(t, []string{"aaaa:maxlen"}, e.dl.bodies())
}

func TestMaxLengthZeroDeliversToWaitingConsumer(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-length", int64(0))
	_, c := subscribe(t, q, 1)
	e.publish(t, "", msg("m1", "q"))
	e.publish(t, "", msg("m2", "q"))
	assert.Equal(t, []string{"m1"}, c.bodies())
	assert.Equal(t, []string{"m2:maxlen"}, e.dl.bodies())
}

func TestOnlyReadyMessagesCount(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-length", int64(1), "x-overflow", "reject-publish")
	e.publish(t, "", msg("m1", "q"))
	subscribe(t, q, 1)
	assert.Equal(t, Accepted, e.publish(t, "", msg("m2", "q")), "m1 is unacked, not ready")
	assert.Equal(t, Rejected, e.publish(t, "", msg("m3", "q")))
}

func TestDropHeadAfterClassicRequeue(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-length", int64(1))
	e.publish(t, "", msg("m1", "q"))
	s, c := subscribe(t, q, 1)
	e.publish(t, "", msg("m2", "q"))
	require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleRelease}))
	assert.Equal(t, []string{"m1:maxlen"}, e.dl.bodies(), "the requeued head is dropped")
	assert.Equal(t, 1, q.Len())
}

func TestRejectPublishClassic(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-length", int64(2), "x-overflow", "reject-publish")
	publishN(t, e, "q", 2)
	res, err := e.v.Publish(Publish{Exchange: "", Msg: msg("m3", "q")})
	st := res.Outcome
	require.NoError(t, err)
	assert.Equal(t, Outcome{Kind: Rejected, Error: &Error{
		Condition:   CondResourceLimitExceeded,
		Description: "queue 'q' exceeded maximum length",
		Info: value.Map{
			{Key: value.Symbol("queue"), Value: "q"},
			{Key: value.Symbol("reason"), Value: value.Symbol("maxlen")},
		},
	}}, st)
	assert.Equal(t, 2, q.Len())
	assert.Empty(t, e.dl.all(), "reject-publish dead-letters nothing")

	s, c := subscribe(t, q, 1)
	require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleAccept}))
	assert.Equal(t, Accepted, e.publish(t, "", msg("m4", "q")))
}

func TestRejectPublishBytesClassic(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-length-bytes", int64(6), "x-overflow", "reject-publish")
	assert.Equal(t, Accepted, e.publish(t, "", msg("aaa", "q")))
	assert.Equal(t, Rejected, e.publish(t, "", msg("bbbb", "q")))
	assert.Equal(t, Accepted, e.publish(t, "", msg("ccc", "q")))
	assert.Equal(t, 2, q.Len())
}

func TestRejectPublishDLXClassic(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-length", int64(1), "x-overflow", "reject-publish-dlx")
	e.publish(t, "", msg("m1", "q"))
	assert.Equal(t, Rejected, e.publish(t, "", msg("m2", "q")))
	assert.Equal(t, []string{"m2:maxlen"}, e.dl.bodies(), "the new message is dead-lettered")
	assert.Equal(t, 1, q.Len())
}

func TestRejectPublishQuorum(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum, "x-max-length", int64(10), "x-overflow", "reject-publish")
	publishN(t, e, "q", 11) // the message crossing the limit is accepted
	assert.Equal(t, 11, q.Len())
	assert.Equal(t, Rejected, e.publish(t, "", msg("x", "q")))

	s, c := subscribe(t, q, 1)
	consume := func(n int) {
		for range n {
			require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleAccept}))
			s.Flow(uint32(c.n()), 1, false)
		}
	}
	assert.Equal(t, 10, q.Len())
	assert.Equal(t, Rejected, e.publish(t, "", msg("x", "q")))
	consume(1) // 9 ready: above 80 %
	assert.Equal(t, 9, q.Len())
	assert.Equal(t, Rejected, e.publish(t, "", msg("x", "q")))
	consume(1) // 8 ready: <= 80 %
	assert.Equal(t, 8, q.Len())
	assert.Equal(t, Accepted, e.publish(t, "", msg("y", "q")))
	assert.Empty(t, e.dl.all())
}

func TestRejectPublishDLXQuorumIsDropHead(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Quorum, "x-max-length", int64(1), "x-overflow", "reject-publish-dlx")
	publishN(t, e, "q", 2)
	assert.Equal(t, 1, q.Len())
	assert.Equal(t, []string{"m1:maxlen"}, e.dl.bodies())
}

func TestPublishOutcomeAcrossQueues(t *testing.T) {
	e := newEnv(t)
	full := e.queue(t, "full", Classic, "x-max-length", int64(0), "x-overflow", "reject-publish")
	ok := e.queue(t, "ok", Classic)
	require.NoError(t, e.v.Bind(Binding{Source: "amq.fanout", Destination: "ok"}))
	assert.Equal(t, Accepted, e.publish(t, "amq.fanout", msg("m")))
	require.NoError(t, e.v.Bind(Binding{Source: "amq.fanout", Destination: "full"}))
	res, err := e.v.Publish(Publish{Exchange: "amq.fanout", Msg: msg("m")})
	st := res.Outcome
	require.NoError(t, err)
	assert.Equal(t, Rejected, st.Kind, "any refusing queue rejects the publish")
	assert.Equal(t, "queue 'full' exceeded maximum length", st.Error.Description)
	assert.Equal(t, 2, ok.Len())
	assert.Zero(t, full.Len())
}

func TestOverflowWithTTLAndDropHeadOrder(t *testing.T) {
	e := newEnv(t)
	q := e.queue(t, "q", Classic, "x-max-length", int64(3))
	for i := 1; i <= 6; i++ {
		e.publish(t, "", msg(fmt.Sprintf("m%d", i), "q"))
	}
	assert.Equal(t, []string{"m1:maxlen", "m2:maxlen", "m3:maxlen"}, e.dl.bodies())
	assert.Equal(t, 3, q.Len())
}
