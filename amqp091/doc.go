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
// Where RabbitMQ has no answer of its own the codec picks the nearest
// one: a malformed field table or property list, on which RabbitMQ's
// parser crashes (the channel or connection then dies with 541
// internal-error), is 501 frame-error "cannot decode", the code its
// generated decoder gives every other malformed argument list; ids that
// name no method, on which RabbitMQ's lookup exits, are 503
// command-invalid; a property flag class basic does not define is 501
// (RabbitMQ ignores the low two flag bits and then fails to match the
// rest).
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
// the front end wraps the socket in a FrameReader (SetFrameMax after
// tune-ok), reads frames, handles channel-0 frames in its connection state
// machine and passes every other channel's frames through that channel's
// Assembler. It decodes methods with ParseMethodHeader and the Decode of a
// struct it reuses per channel (ParseMethod allocates a new one), content
// headers with ParseContentHeader, keeping the raw properties, and
// Properties.Decode when routing or conversion needs them. It writes with
// AppendMethodFrame, AppendContent and AppendHeartbeat into its own
// output buffer. An *Error from any of these (WithChannel sets its
// channel) goes on the wire as connection.close or channel.close
// according to Scope, with ReplyText, ClassID and MethodID.
//
// What RabbitMQ does with a connection beyond the codec (negotiation
// limits, reply codes of the class semantics, message conversion) is the
// front end's; the reply code constants and IsHardError are here so both
// use one table.
package amqp091
