// Package filter implements AMQP Filter Expressions (OASIS AMQP Filter
// Expressions Version 1.0, as RabbitMQ 4.2+ accepts them on an attach
// source) for consumers of classic and quorum queues: a consumer with
// filters in force gets only the messages they match, and the others stay
// in the queue for other consumers (router.MessageFilter).
//
// Three filters are understood, each an entry of the source's filter set
// whose value is a described value:
//
//	amqp:properties-filter              0x173  map of property name (symbol) to reference value
//	amqp:application-properties-filter  0x174  map of application property (string) to reference value
//	amqp:sql-filter                     0x120  an SQL expression (string)
//
// A message passes the set when it passes every filter in force (AMQP 1.0
// section 3.5.8). Other filters (a JMS selector, stream filters, unknown
// ones) are not applied and left out of the attach reply; a filter of one
// of these three descriptors that is malformed is refused.
//
// # Property filters
//
// A reference value matches the message's field when they are equal, with
// numbers of any type equal by value, strings and symbols equal by
// characters, and a timestamp equal to its milliseconds. A string reference
// value starting with "&p:" matches a field starting with the rest, "&s:"
// one ending with it, "&&" stands for a literal "&", and any other "&" is
// refused. In an application-properties filter a null reference value
// matches any value of a key that is present.
//
// # SQL expressions
//
// The grammar (the filter-expressions SQL profile as RabbitMQ 4.3 parses
// it), highest precedence last:
//
//	expression := or
//	or         := and { "OR" and }
//	and        := not { "AND" not }
//	not        := "NOT" not | comparison
//	comparison := additive [ ( "=" | "<>" | "!=" | "<" | "<=" | ">" | ">=" ) additive
//	                       | [ "NOT" ] "LIKE" string [ "ESCAPE" string ]
//	                       | [ "NOT" ] "IN" "(" additive { "," additive } ")" ]
//	            | identifier "IS" [ "NOT" ] "NULL"
//	additive   := multiplicative { ( "+" | "-" ) multiplicative }
//	multiplicative := unary { ( "*" | "/" | "%" ) unary }
//	unary      := [ "+" | "-" ] primary
//	primary    := "(" expression ")" | literal | identifier | "UTC" "(" ")"
//	literal    := integer | decimal | string | binary | "TRUE" | "FALSE"
//
// Keywords are upper case; their lower-case spellings (and EXISTS, NAN,
// INF, LOWER, UPPER, LEFT, RIGHT, SUBSTRING, DATE in any case) are not
// identifiers. Integers are digits; decimals are digits "." digits with an
// optional exponent "E" [+-] digits; strings are in single or double
// quotes, the quote doubled inside; binaries are 0x and pairs of upper-case
// hex digits. Identifiers are letters, digits and underscores starting with
// a letter, or any text in brackets ([my-key], "]]" for "]"), naming an
// application property; or a section and a field:
//
//	header.priority, h.priority, header.durable, h.durable
//	properties.NAME, p.NAME           message_id, user_id, to, subject, reply_to, correlation_id,
//	                                  content_type, content_encoding, absolute_expiry_time,
//	                                  creation_time, group_id, group_sequence, reply_to_group_id
//	application_properties.KEY, a.KEY
//	message_annotations.KEY, m.KEY, m.[KEY]    (epitaph; RabbitMQ refuses this section)
//	x-opt-deaths.FIELD                         (epitaph extension)
//
// Message annotations are those a consumer receives: the dead-letter
// annotations (x-first-death-queue, x-last-death-reason,
// x-last-death-error-condition, ...), x-exchange and x-routing-key, the
// broker's and the publisher's others. x-opt-deaths itself is a list, not a
// value an expression compares (IS NOT NULL is true when there is one);
// x-opt-deaths.queue, .reason, .count, .exchange, .first_time, .last_time
// and .ttl read its most recent entry.
//
// Values: strings and symbols are strings; every integer type and
// timestamps (milliseconds) are integers; float and double are decimals; a
// null or missing field is NULL. Evaluation is three-valued (true, false,
// unknown): a comparison or arithmetic with NULL is unknown, a comparison
// of values of different types (numbers aside) is false, division is
// decimal, division or modulo by zero is unknown, LIKE on a non-string is
// unknown, and a message matches only when the expression is true.
//
// Limits (Limits; by default RabbitMQ's): an expression of at most 4096
// characters and 200 tokens, nested at most 64 deep (parentheses, NOT,
// signs), and property filters of at most 16 fields. A filter beyond them,
// or one that does not parse, is refused.
package filter
