package annotations

import (
	"encoding/binary"
	"math"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/value"
)

// AppendDeaths appends the x-opt-deaths value of h, byte for byte what
// amqp10.AppendValue(b, DeathsValue(h)) writes (an array of map32, each
// map's keys in RabbitMQ's order), without building the intermediate maps.
func AppendDeaths(b []byte, h History) []byte {
	start := len(b)
	b = append(b, amqp10.TypeArray32, 0, 0, 0, 0, 0, 0, 0, 0, amqp10.TypeMap32)
	for i := range h.Deaths {
		b = appendDeath(b, &h.Deaths[i])
	}
	return finishArray(b, start, len(h.Deaths))
}

// appendDeath appends one death as a map32 array element (no constructor).
func appendDeath(b []byte, d *Death) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	n := 7
	if d.HasTTL {
		b = amqp10.AppendUint(amqp10.AppendSymbol(b, "ttl"), d.TTL)
		n++
	}
	b = amqp10.AppendString(amqp10.AppendSymbol(b, "queue"), d.Queue)
	b = amqp10.AppendSymbol(amqp10.AppendSymbol(b, "reason"), value.Symbol(d.Reason))
	b = amqp10.AppendULong(amqp10.AppendSymbol(b, "count"), d.Count)
	b = amqp10.AppendTimestamp(amqp10.AppendSymbol(b, "first-time"), d.FirstTime)
	b = amqp10.AppendTimestamp(amqp10.AppendSymbol(b, "last-time"), d.LastTime)
	b = amqp10.AppendString(amqp10.AppendSymbol(b, "exchange"), d.Exchange)
	b = amqp10.AppendSymbol(b, "routing-keys")
	ks := len(b)
	b = append(b, amqp10.TypeArray32, 0, 0, 0, 0, 0, 0, 0, 0, amqp10.TypeStr32)
	for _, k := range d.RoutingKeys {
		b = binary.BigEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
	}
	b = finishArray(b, ks, len(d.RoutingKeys))
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-(start+8)+4))
	binary.BigEndian.PutUint32(b[start+4:], uint32(2*n))
	return b
}

// finishArray completes an array whose constructor and reserved 32-bit size
// and count are at start, followed by the element constructor and the
// elements: array8 when it fits, as the amqp10 encoder chooses.
func finishArray(b []byte, start, count int) []byte {
	body := len(b) - (start + 9) // element constructor + elements
	if count < math.MaxUint8 && body+1 <= math.MaxUint8 {
		b[start] = amqp10.TypeArray8
		b[start+1] = byte(body + 1)
		b[start+2] = byte(count)
		copy(b[start+3:], b[start+9:])
		return b[:len(b)-6]
	}
	binary.BigEndian.PutUint32(b[start+1:], uint32(body+4))
	binary.BigEndian.PutUint32(b[start+5:], uint32(count))
	return b
}

// EncodedDeaths is x-opt-deaths as an encoded value for a message's
// annotations: one allocation instead of a map per death.
func EncodedDeaths(h History) amqp10.Raw {
	size := 16
	for i := range h.Deaths {
		d := &h.Deaths[i]
		size += 120 + len(d.Queue) + len(d.Reason) + len(d.Exchange)
		for _, k := range d.RoutingKeys {
			size += 4 + len(k)
		}
	}
	return amqp10.Raw(AppendDeaths(make([]byte, 0, size), h))
}
