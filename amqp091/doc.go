// Package amqp091 is epitaph's AMQP 0-9-1 wire layer: protocol-header
// detection for the shared port, frames (method, content header, content
// body, heartbeat) and a frame reader that enforces the negotiated
// frame-max, the per-channel frame order (method, header, bodies), field
// tables and arrays with RabbitMQ's type set, every method of the
// connection, channel, access, exchange, queue, basic, confirm and tx
// classes with RabbitMQ's extensions, and the basic content properties.
//
// It imports only the standard library. Encoders are append-style
// (strconv.Append* shape) and allocate nothing when the output has
// capacity; decoders take a byte slice and decode into structs the caller
// owns. Strings and tables decoded from a frame are copies, so they stay
// valid after the reader reuses its buffer.
//
// Every decoding failure is an *Error carrying the reply code RabbitMQ
// gives for it (501 frame-error, 503 command-invalid, 505
// unexpected-frame) and the channel it arrived on; Error.Scope says
// whether the front end answers with connection.close or channel.close.
//
// # Limits
//
//   - Before connection.tune-ok the reader accepts frames of at most
//     InitialFrameMax (8192) octets, as RabbitMQ does; afterwards the
//     negotiated frame-max. A frame's payload buffer grows only as its
//     octets arrive, so a peer claiming a 4 GiB frame costs nothing until
//     it sends the octets, and is refused at once if over the limit.
//   - Field tables and arrays nest at most MaxDepth levels. Declared
//     lengths are checked against the octets present before anything is
//     sliced or allocated.
//   - A content body may declare at most MaxBodySize octets (RabbitMQ's
//     hard limit); the broker's configurable max-message-size is the front
//     end's business.
//
// # Use by the front end
//
// The listener reads 8 octets and calls Classify. For a 0-9-1 connection
// the front end wraps the socket in a FrameReader, reads frames, feeds
// channel-0 frames to its connection state machine and other channels'
// frames through that channel's Assembler, and decodes methods with
// ParseMethodHeader plus the method struct's Decode (or ParseMethod). It
// writes with AppendMethodFrame, AppendContent and AppendHeartbeat into
// its own output buffer. An *Error from any of these goes on the wire as
// connection.close or channel.close according to its Scope.
package amqp091
