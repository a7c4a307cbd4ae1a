// Package link is epitaph's AMQP 1.0 endpoint layer: the listener, the
// protocol-header and SASL handshake, and for every connection three
// goroutines, a reader, a loop and a writer. The loop owns every piece of
// session and link state (windows, credit, delivery-ids, unsettled maps and
// handles); the reader only decodes frames and the writer only writes bytes.
// When the writer is idle the loop writes to the socket itself, in one
// non-blocking call (flushOut); outbuf.busy says which of the two holds the
// socket. The comments on conn and outbuf state both rules; the package's
// tests check them at run time (owner.go).
//
// Queues hand deliveries to a link through the connection's mailbox; a queue
// never hands out more than the link's credit, so credit bounds the mailbox.
// The dead-letter event source (events.go) is pulled instead: events wait
// in the link's bounded dlevents subscription, whose hub only posts a
// wake-up to the mailbox, and the loop takes one per credit.
//
// link is the AMQP 1.0 front end of the protocol-neutral router: a
// transfer becomes a router.Message with a router.AMQP10 container (the
// bare message kept byte for byte), the router's outcomes become delivery
// states (receiver.go: deliveryState) and a consumer's delivery states
// become router settlements (session.go: settlementOf); a delivery is
// written from the container's wire message with the router's header and
// annotations (sender.go: router.AppendAMQP10Delivery).
//
// Other goroutines see a connection only through Server.Connections (an
// identity the loop publishes once, after open, and counters kept with
// atomics), see its sessions only through Server.Sessions, which the loop
// answers over the connection's infoReq channel, and close it only through
// Server.CloseConnection, which asks the loop over its force channel; none of
// them touches the loop's state.
package link
