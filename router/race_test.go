package router

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/value"
)

// republisher dead-letters by publishing to the default exchange with the
// queue's x-dead-letter-routing-key, like an at-most-once DLX with no
// cycle detection: it re-enters the router from DeadLetter.
type republisher struct {
	v     *VHost
	count atomic.Int64
}

func (r *republisher) DeadLetter(src *Queue, dead []Dead) {
	key, ok := src.DeadLetterRoutingKey()
	if !ok {
		return
	}
	for _, d := range dead {
		r.count.Add(1)
		m := d.Msg.withState(d.Msg.DeliveryCount, d.Msg.Anns)
		m.RoutingKeys = []string{key}
		_, _ = r.v.Publish(Publish{Exchange: "", Msg: m})
	}
}

func TestDeadLettererMayReenter(t *testing.T) {
	r := &republisher{}
	b := New(Options{DeadLetterer: r})
	defer b.Close()
	v, _ := b.VHost("/")
	r.v = v
	// q dead-letters to itself on reject.
	q, _, err := v.DeclareQueue(QueueSpec{Name: "q", Type: Quorum, Durable: true, Arguments: value.Map{
		{Key: "x-dead-letter-exchange", Value: ""}, {Key: "x-dead-letter-routing-key", Value: "q"},
	}})
	require.NoError(t, err)
	_, err = v.Publish(Publish{Exchange: "", Msg: msg("m", "q")})
	require.NoError(t, err)
	s, c := subscribe(t, q, 10)
	for i := range 3 {
		require.NoError(t, s.Settle(c.last(t).Tag, Settlement{Kind: SettleReject}))
		assert.Equal(t, uint32(i+1), c.last(t).Header.DeliveryCount, "the carried delivery count")
	}
	assert.Equal(t, int64(3), r.count.Load())
}

type settlingConsumer struct {
	mu   sync.Mutex
	tags []uint64
}

func (c *settlingConsumer) Deliver(d Delivery) {
	c.mu.Lock()
	c.tags = append(c.tags, d.Tag)
	c.mu.Unlock()
}
func (c *settlingConsumer) Drained(uint32) {}

func (c *settlingConsumer) take() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tags
	c.tags = nil
	return t
}

// TestConcurrentUse exercises every entry point from many goroutines; run
// it with -race.
func TestConcurrentUse(t *testing.T) {
	for _, typ := range []QueueType{Classic, Quorum} {
		t.Run(string(typ), func(t *testing.T) {
			r := &republisher{}
			b := New(Options{DeadLetterer: r})
			defer b.Close()
			v, _ := b.VHost("/")
			r.v = v
			_, _, err := v.DeclareQueue(QueueSpec{Name: "dlq", Durable: true, Arguments: value.Map{{Key: "x-max-length", Value: int64(50)}}})
			require.NoError(t, err)
			q, _, err := v.DeclareQueue(QueueSpec{Name: "work", Type: typ, Durable: true, Arguments: value.Map{
				{Key: "x-message-ttl", Value: int64(5)},
				{Key: "x-max-length", Value: int64(100)},
				{Key: "x-dead-letter-exchange", Value: ""},
				{Key: "x-dead-letter-routing-key", Value: "dlq"},
			}})
			require.NoError(t, err)
			require.NoError(t, v.Bind(Binding{Source: "amq.topic", Destination: "work", Key: "w.#"}))

			var wg sync.WaitGroup
			stop := make(chan struct{})
			for p := range 4 {
				wg.Go(func() { // exits after 300 messages
					for i := range 300 {
						m := msg(fmt.Sprintf("p%d-%d", p, i), "w.x")
						if i%3 == 0 {
							m.Header.TTL, m.Header.HasTTL = 1, true
						}
						_, _ = v.Publish(Publish{Exchange: "amq.topic", Msg: m})
					}
				})
			}
			outcomes := []Settlement{
				{Kind: SettleAccept},
				{Kind: SettleRelease},
				{Kind: SettleReject},
				{Kind: SettleModify, DeliveryFailed: true, Annotations: value.Map{{Key: value.Symbol("x-n"), Value: int64(1)}}},
				{Kind: SettleModify, UndeliverableHere: true},
			}
			for k := range 3 {
				wg.Go(func() { // exits when stop is closed
					for round := 0; ; round++ {
						c := &settlingConsumer{}
						s, err := q.Subscribe(c, ConsumerOptions{PreSettled: k == 2})
						if err != nil {
							return
						}
						var dc uint32
						for i := range 50 {
							select {
							case <-stop:
								s.Cancel(CancelConnectionLost)
								return
							default:
							}
							s.Flow(dc, 5, i%10 == 9)
							for j, tag := range c.take() {
								dc++
								if k != 2 {
									_ = s.Settle(tag, outcomes[(j+i+round)%len(outcomes)])
								}
							}
							_ = q.Len()
							_ = q.Info()
						}
						s.Cancel(CancelReason(round % 2))
					}
				})
			}
			wg.Go(func() { // exits when stop is closed
				for {
					select {
					case <-stop:
						return
					default:
					}
					_, _, _ = v.DeclareQueue(QueueSpec{Name: "work", Type: typ, Durable: true, Arguments: q.Arguments()})
					_ = v.Bindings()
					_ = q.Purge()
					time.Sleep(time.Millisecond)
				}
			})
			time.Sleep(200 * time.Millisecond)
			close(stop)
			wg.Wait()
			assert.False(t, q.Deleted())
		})
	}
}
