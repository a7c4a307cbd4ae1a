// Package amqp10 is epitaph's AMQP 1.0 wire layer: the type system and its
// codec, the performatives, frame reading and writing, SASL frames, the lazy
// message-section scanner, and the spec's error conditions.
//
// It imports only the standard library. Encoders are append-style
// (strconv.Append* shape) and allocate nothing for the hot frames (Transfer,
// Flow, Disposition); decoders take a byte slice and decode into structs the
// caller owns.
//
// Files:
//
//	types.go         Go representations of AMQP values (Symbol, Map, Array, ...)
//	encode.go        Append* encoders, AppendValue for any value
//	decode.go        Read* decoders, ReadValue for any value (depth-limited)
//	errors.go        ErrCond constants, Error, ProtocolError and scopes
//	performatives.go open/begin/attach/flow/transfer/disposition/detach/end/close
//	terminus.go      Source, Target, DeliveryState
//	sasl.go          SASL frames and protocol headers
//	frame.go         frame header parsing and writing
//	message.go       the lazy message: section scanner and re-encoder
package amqp10
