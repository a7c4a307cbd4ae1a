// Package link is epitaph's AMQP 1.0 endpoint layer: the listener, the
// protocol-header and SASL handshake, and for every connection three
// goroutines, a reader, a loop and a writer. The loop owns every piece of
// session and link state (windows, credit, delivery-ids, unsettled maps and
// handles); the reader only decodes frames and the writer only writes bytes.
//
// Queues hand deliveries to a link through the connection's mailbox; a queue
// never hands out more than the link's credit, so credit bounds the mailbox.
//
// Files:
//
//	server.go    Server, Serve, Shutdown, accept loop
//	handshake.go protocol headers, SASL, open
//	conn.go      the connection loop, reader, writer, mailbox
//	session.go   begin/end, session flow control, dispositions
//	receiver.go  links on which the broker receives (publishers)
//	sender.go    links on which the broker sends (consumers)
//	address.go   RabbitMQ address parsing
package link
