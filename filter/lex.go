package filter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits bound the filters a consumer may attach with (the
// filter-expressions specification advises bounding their complexity).
type Limits struct {
	// SQLMaxLength is the most characters of an SQL expression.
	SQLMaxLength int
	// SQLMaxTokens is the most tokens of an SQL expression.
	SQLMaxTokens int
	// SQLMaxDepth is the deepest nesting of parentheses, NOT and signs.
	SQLMaxDepth int
	// MaxFields is the most fields of a property filter.
	MaxFields int
}

// DefaultLimits are RabbitMQ 4.3's limits (4096 characters, 200 tokens,
// 16 fields) and a nesting depth of 64.
func DefaultLimits() Limits {
	return Limits{SQLMaxLength: 4096, SQLMaxTokens: 200, SQLMaxDepth: 64, MaxFields: 16}
}

type tokenKind uint8

const (
	tokEOF tokenKind = iota
	tokAnd
	tokOr
	tokNot
	tokLike
	tokIn
	tokIs
	tokNull
	tokEscape
	tokTrue
	tokFalse
	tokUTC
	tokEq
	tokNe
	tokLt
	tokLe
	tokGt
	tokGe
	tokPlus
	tokMinus
	tokStar
	tokSlash
	tokPercent
	tokLParen
	tokRParen
	tokComma
	tokInt
	tokFloat
	tokString
	tokBinary
	tokIdent
)

var tokenNames = [...]string{
	tokEOF: "end of expression", tokAnd: "AND", tokOr: "OR", tokNot: "NOT", tokLike: "LIKE",
	tokIn: "IN", tokIs: "IS", tokNull: "NULL", tokEscape: "ESCAPE", tokTrue: "TRUE", tokFalse: "FALSE",
	tokUTC: "UTC", tokEq: "=", tokNe: "<>", tokLt: "<", tokLe: "<=", tokGt: ">", tokGe: ">=",
	tokPlus: "+", tokMinus: "-", tokStar: "*", tokSlash: "/", tokPercent: "%", tokLParen: "(",
	tokRParen: ")", tokComma: ",", tokInt: "integer", tokFloat: "decimal", tokString: "string",
	tokBinary: "binary", tokIdent: "identifier",
}

func (k tokenKind) String() string { return tokenNames[k] }

var keywords = map[string]tokenKind{
	"AND": tokAnd, "OR": tokOr, "NOT": tokNot, "LIKE": tokLike, "IN": tokIn, "IS": tokIs,
	"NULL": tokNull, "ESCAPE": tokEscape, "TRUE": tokTrue, "FALSE": tokFalse, "UTC": tokUTC,
}

// reserved are the words (any case) that are not identifiers unless they
// are one of the keywords above in upper case.
var reserved = map[string]bool{
	"and": true, "or": true, "not": true, "like": true, "in": true, "is": true, "null": true,
	"escape": true, "true": true, "false": true, "exists": true, "nan": true, "inf": true,
	"lower": true, "upper": true, "left": true, "right": true, "substring": true, "utc": true, "date": true,
}

type token struct {
	kind tokenKind
	pos  int // byte offset in the expression
	i    int64
	f    float64
	s    string // string, binary (raw bytes), identifier: the field reference's text
	ref  fieldRef
}

// lex splits an expression into tokens.
func lex(src string, lim Limits) ([]token, error) {
	if !utf8.ValidString(src) {
		return nil, fmt.Errorf("expression is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(src); n > lim.SQLMaxLength {
		return nil, fmt.Errorf("expression of %d characters, more than %d", n, lim.SQLMaxLength)
	}
	var toks []token
	i := 0
	for {
		for i < len(src) && isSpace(src[i]) {
			i++
		}
		if i == len(src) {
			return append(toks, token{kind: tokEOF, pos: i}), nil
		}
		if len(toks) == lim.SQLMaxTokens {
			return nil, fmt.Errorf("more than %d tokens", lim.SQLMaxTokens)
		}
		t, next, err := lexOne(src, i)
		if err != nil {
			return nil, fmt.Errorf("at offset %d: %w", i, err)
		}
		t.pos = i
		toks = append(toks, t)
		i = next
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' || c == '\n' || c == '\r' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isLetter(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isHex(c byte) bool { return isDigit(c) || c >= 'A' && c <= 'F' }

// lexOne reads the token at src[i] (not a space).
func lexOne(src string, i int) (token, int, error) {
	c := src[i]
	two := ""
	if i+1 < len(src) {
		two = src[i : i+2]
	}
	switch two {
	case "<>", "!=":
		return token{kind: tokNe}, i + 2, nil
	case ">=":
		return token{kind: tokGe}, i + 2, nil
	case "<=":
		return token{kind: tokLe}, i + 2, nil
	}
	switch c {
	case '=':
		return token{kind: tokEq}, i + 1, nil
	case '<':
		return token{kind: tokLt}, i + 1, nil
	case '>':
		return token{kind: tokGt}, i + 1, nil
	case '+':
		return token{kind: tokPlus}, i + 1, nil
	case '-':
		return token{kind: tokMinus}, i + 1, nil
	case '*':
		return token{kind: tokStar}, i + 1, nil
	case '/':
		return token{kind: tokSlash}, i + 1, nil
	case '%':
		return token{kind: tokPercent}, i + 1, nil
	case '(':
		return token{kind: tokLParen}, i + 1, nil
	case ')':
		return token{kind: tokRParen}, i + 1, nil
	case ',':
		return token{kind: tokComma}, i + 1, nil
	case '\'', '"':
		s, next, err := lexQuoted(src, i, c)
		return token{kind: tokString, s: s}, next, err
	case '[':
		name, next, err := lexDelimited(src, i)
		if err != nil {
			return token{}, i, err
		}
		return token{kind: tokIdent, s: src[i:next], ref: fieldRef{section: secApplication, key: name}}, next, nil
	}
	switch {
	case c == '0' && i+1 < len(src) && src[i+1] == 'x':
		return lexBinary(src, i)
	case isDigit(c):
		return lexNumber(src, i)
	case isLetter(c):
		return lexWord(src, i)
	}
	r, _ := utf8.DecodeRuneInString(src[i:])
	return token{}, i, fmt.Errorf("unexpected character %q", r)
}

// lexQuoted reads a string in quote q, the quote doubled inside.
func lexQuoted(src string, i int, q byte) (string, int, error) {
	var b strings.Builder
	j := i + 1
	for {
		k := strings.IndexByte(src[j:], q)
		if k < 0 {
			return "", i, fmt.Errorf("unterminated string")
		}
		b.WriteString(src[j : j+k])
		j += k + 1
		if j < len(src) && src[j] == q {
			b.WriteByte(q)
			j++
			continue
		}
		return b.String(), j, nil
	}
}

// lexDelimited reads a bracketed identifier: "[[" and "]]" stand for the
// brackets, and control characters are not allowed.
func lexDelimited(src string, i int) (string, int, error) {
	var b strings.Builder
	j := i + 1
	for j < len(src) {
		c := src[j]
		switch {
		case c == '[' && j+1 < len(src) && src[j+1] == '[':
			b.WriteByte('[')
			j += 2
		case c == ']' && j+1 < len(src) && src[j+1] == ']':
			b.WriteByte(']')
			j += 2
		case c == ']':
			return b.String(), j + 1, nil
		case c == '[':
			return "", i, fmt.Errorf("unescaped '[' in a delimited identifier")
		case c < 32 || c == 127:
			return "", i, fmt.Errorf("control character in a delimited identifier")
		default:
			b.WriteByte(c)
			j++
		}
	}
	return "", i, fmt.Errorf("unterminated delimited identifier")
}

func lexBinary(src string, i int) (token, int, error) {
	j := i + 2
	var b []byte
	for j+1 < len(src) && isHex(src[j]) && isHex(src[j+1]) {
		v, _ := strconv.ParseUint(src[j:j+2], 16, 8)
		b = append(b, byte(v))
		j += 2
	}
	if len(b) == 0 || j < len(src) && (isHex(src[j]) || isLetter(src[j]) || isDigit(src[j])) {
		return token{}, i, fmt.Errorf("malformed binary constant (0x and pairs of upper-case hex digits)")
	}
	return token{kind: tokBinary, s: string(b)}, j, nil
}

// lexNumber reads an integer (digits) or a decimal (digits "." digits with
// an optional exponent "E" [+-] digits).
func lexNumber(src string, i int) (token, int, error) {
	j := i
	for j < len(src) && isDigit(src[j]) {
		j++
	}
	if j+1 < len(src) && src[j] == '.' && isDigit(src[j+1]) {
		j++
		for j < len(src) && isDigit(src[j]) {
			j++
		}
		if j < len(src) && src[j] == 'E' {
			k := j + 1
			if k < len(src) && (src[k] == '+' || src[k] == '-') {
				k++
			}
			if k < len(src) && isDigit(src[k]) {
				for k < len(src) && isDigit(src[k]) {
					k++
				}
				j = k
			}
		}
		f, err := strconv.ParseFloat(src[i:j], 64)
		if err != nil || math.IsInf(f, 0) {
			return token{}, i, fmt.Errorf("decimal %q out of range", src[i:j])
		}
		return token{kind: tokFloat, f: f}, j, nil
	}
	v, err := strconv.ParseInt(src[i:j], 10, 64)
	if err != nil {
		// Beyond 64 bits: kept as a decimal, as the value cannot be an
		// integer field's anyway.
		f, _ := strconv.ParseFloat(src[i:j], 64)
		return token{kind: tokFloat, f: f}, j, nil
	}
	return token{kind: tokInt, i: v}, j, nil
}

// lexWord reads a keyword, a regular identifier (an application property)
// or a section identifier (SECTION.FIELD).
func lexWord(src string, i int) (token, int, error) {
	// A section prefix: letters, '_' and '-', then '.'.
	j := i + 1
	for j < len(src) && (isLetter(src[j]) || src[j] == '_' || src[j] == '-') {
		j++
	}
	if j+1 < len(src) && src[j] == '.' && (isLetter(src[j+1]) || src[j+1] == '[') {
		section := src[i:j]
		var field string
		k := j + 1
		if src[k] == '[' {
			name, next, err := lexDelimited(src, k)
			if err != nil {
				return token{}, i, err
			}
			field, k = name, next
		} else {
			k++
			for k < len(src) && (isLetter(src[k]) || isDigit(src[k]) || src[k] == '_') {
				k++
			}
			field = src[j+1 : k]
		}
		ref, err := sectionField(section, field, src[k-1] == ']')
		if err != nil {
			return token{}, i, err
		}
		return token{kind: tokIdent, s: src[i:k], ref: ref}, k, nil
	}
	j = i + 1
	for j < len(src) && (isLetter(src[j]) || isDigit(src[j]) || src[j] == '_') {
		j++
	}
	word := src[i:j]
	if k, ok := keywords[word]; ok {
		return token{kind: k}, j, nil
	}
	if reserved[strings.ToLower(word)] {
		return token{}, i, fmt.Errorf("%q is a reserved word, not an identifier (keywords are upper case)", word)
	}
	return token{kind: tokIdent, s: word, ref: fieldRef{section: secApplication, key: word}}, j, nil
}
