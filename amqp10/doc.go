// Package amqp10 is epitaph's AMQP 1.0 wire layer: the type system and its
// codec, the performatives, frame reading and writing, SASL frames, the lazy
// message-section scanner, and the spec's error conditions.
//
// Its decoded value types (Map, List, Symbol, ...) are aliases of package
// value's, the broker's protocol-neutral value model, so that the codec
// reads and writes the router's values directly.
//
// It imports only the standard library. Encoders are append-style
// (strconv.Append* shape) and allocate nothing for the hot frames (Transfer,
// Flow, Disposition); decoders take a byte slice and decode into structs the
// caller owns.
package amqp10
