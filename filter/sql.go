package filter

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"time"
	"unicode/utf8"

	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

type op uint8

const (
	opLit op = iota
	opField
	opUTC
	opAnd
	opOr
	opNot
	opEq
	opNe
	opLt
	opLe
	opGt
	opGe
	opAdd
	opSub
	opMul
	opDiv
	opMod
	opNeg
	opPos
	opLike
	opIn
	opIsNull
)

// node is a node of a parsed expression.
type node struct {
	op   op
	l, r *node
	list []*node // opIn
	lit  val     // opLit
	ref  fieldRef
	like likePattern
}

// Expr is a parsed SQL filter expression. It is immutable and may be used
// by many goroutines.
type Expr struct {
	root *node
	src  string
}

// String returns the expression as it was given.
func (e *Expr) String() string { return e.src }

// ParseSQL parses an SQL filter expression (see the package documentation)
// within DefaultLimits.
func ParseSQL(src string) (*Expr, error) { return ParseSQLWithin(src, DefaultLimits()) }

// ParseSQLWithin parses an SQL filter expression within lim.
func ParseSQLWithin(src string, lim Limits) (*Expr, error) {
	toks, err := lex(src, lim)
	if err != nil {
		return nil, err
	}
	p := parser{toks: toks, maxDepth: lim.SQLMaxDepth}
	root, err := p.expression(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, p.unexpected(t)
	}
	return &Expr{root: root, src: src}, nil
}

// Match reports whether the message m, whose broker annotations are anns,
// matches: the expression is true (not false, not unknown).
func (e *Expr) Match(m *router.Message, anns value.Map) bool {
	var v msgView
	v.init(m, anns)
	return e.match(&v)
}

func (e *Expr) match(v *msgView) bool {
	r := eval(e.root, v)
	return r.k == kBool && r.i == 1
}

type parser struct {
	toks     []token
	pos      int
	maxDepth int
}

func (p *parser) peek() token { return p.toks[p.pos] }

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tokEOF {
		p.pos++
	}
	return t
}

func (p *parser) accept(k tokenKind) bool {
	if p.toks[p.pos].kind == k {
		p.pos++
		return true
	}
	return false
}

func (p *parser) unexpected(t token) error {
	if t.kind == tokIdent {
		return fmt.Errorf("unexpected identifier %s at offset %d", t.s, t.pos)
	}
	return fmt.Errorf("unexpected %s at offset %d", t.kind, t.pos)
}

func (p *parser) expect(k tokenKind) error {
	if t := p.next(); t.kind != k {
		return fmt.Errorf("%s expected, %w", k, p.unexpected(t))
	}
	return nil
}

func (p *parser) deeper(depth int) (int, error) {
	if depth >= p.maxDepth {
		return 0, fmt.Errorf("expression nested more than %d deep at offset %d", p.maxDepth, p.peek().pos)
	}
	return depth + 1, nil
}

func (p *parser) expression(depth int) (*node, error) {
	l, err := p.and(depth)
	for err == nil && p.accept(tokOr) {
		var r *node
		if r, err = p.and(depth); err == nil {
			l = &node{op: opOr, l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) and(depth int) (*node, error) {
	l, err := p.not(depth)
	for err == nil && p.accept(tokAnd) {
		var r *node
		if r, err = p.not(depth); err == nil {
			l = &node{op: opAnd, l: l, r: r}
		}
	}
	return l, err
}

func (p *parser) not(depth int) (*node, error) {
	if !p.accept(tokNot) {
		return p.comparison(depth)
	}
	d, err := p.deeper(depth)
	if err != nil {
		return nil, err
	}
	x, err := p.not(d)
	if err != nil {
		return nil, err
	}
	return &node{op: opNot, l: x}, nil
}

var comparisonOps = map[tokenKind]op{tokEq: opEq, tokNe: opNe, tokLt: opLt, tokLe: opLe, tokGt: opGt, tokGe: opGe}

func (p *parser) comparison(depth int) (*node, error) {
	start := p.peek()
	l, err := p.additive(depth)
	if err != nil {
		return nil, err
	}
	t := p.peek()
	if o, ok := comparisonOps[t.kind]; ok {
		p.next()
		r, err := p.additive(depth)
		if err != nil {
			return nil, err
		}
		return &node{op: o, l: l, r: r}, nil
	}
	negate := false
	if t.kind == tokNot {
		if k := p.toks[p.pos+1].kind; k == tokLike || k == tokIn {
			p.next()
			negate = true
			t = p.peek()
		}
	}
	var n *node
	switch t.kind {
	case tokLike:
		p.next()
		if n, err = p.like(l); err != nil {
			return nil, err
		}
	case tokIn:
		p.next()
		if n, err = p.in(l, depth); err != nil {
			return nil, err
		}
	case tokIs:
		p.next()
		if l.op != opField || start.kind != tokIdent || p.toks[p.pos-2].kind != tokIdent {
			return nil, fmt.Errorf("IS NULL applies to an identifier, at offset %d", t.pos)
		}
		neg := p.accept(tokNot)
		if err := p.expect(tokNull); err != nil {
			return nil, err
		}
		n = &node{op: opIsNull, l: l}
		if neg {
			n = &node{op: opNot, l: n}
		}
		return n, nil
	default:
		return l, nil
	}
	if negate {
		n = &node{op: opNot, l: n}
	}
	return n, nil
}

func (p *parser) like(l *node) (*node, error) {
	pat := p.next()
	if pat.kind != tokString {
		return nil, fmt.Errorf("LIKE takes a string pattern, %w", p.unexpected(pat))
	}
	var esc rune = -1
	if p.accept(tokEscape) {
		e := p.next()
		if e.kind != tokString {
			return nil, fmt.Errorf("ESCAPE takes a string, %w", p.unexpected(e))
		}
		if utf8.RuneCountInString(e.s) != 1 {
			return nil, fmt.Errorf("ESCAPE must be one character, at offset %d", e.pos)
		}
		esc, _ = utf8.DecodeRuneInString(e.s)
	}
	lp, err := compileLike(pat.s, esc)
	if err != nil {
		return nil, fmt.Errorf("LIKE pattern at offset %d: %w", pat.pos, err)
	}
	return &node{op: opLike, l: l, like: lp}, nil
}

func (p *parser) in(l *node, depth int) (*node, error) {
	if err := p.expect(tokLParen); err != nil {
		return nil, err
	}
	n := &node{op: opIn, l: l}
	for {
		x, err := p.additive(depth)
		if err != nil {
			return nil, err
		}
		n.list = append(n.list, x)
		if p.accept(tokComma) {
			continue
		}
		if err := p.expect(tokRParen); err != nil {
			return nil, err
		}
		return n, nil
	}
}

func (p *parser) additive(depth int) (*node, error) {
	l, err := p.multiplicative(depth)
	for err == nil {
		var o op
		switch p.peek().kind {
		case tokPlus:
			o = opAdd
		case tokMinus:
			o = opSub
		default:
			return l, nil
		}
		p.next()
		var r *node
		if r, err = p.multiplicative(depth); err == nil {
			l = &node{op: o, l: l, r: r}
		}
	}
	return nil, err
}

func (p *parser) multiplicative(depth int) (*node, error) {
	l, err := p.unary(depth)
	for err == nil {
		var o op
		switch p.peek().kind {
		case tokStar:
			o = opMul
		case tokSlash:
			o = opDiv
		case tokPercent:
			o = opMod
		default:
			return l, nil
		}
		p.next()
		var r *node
		if r, err = p.unary(depth); err == nil {
			l = &node{op: o, l: l, r: r}
		}
	}
	return nil, err
}

func (p *parser) unary(depth int) (*node, error) {
	var o op
	switch p.peek().kind {
	case tokPlus:
		o = opPos
	case tokMinus:
		o = opNeg
	default:
		return p.primary(depth)
	}
	p.next()
	d, err := p.deeper(depth)
	if err != nil {
		return nil, err
	}
	x, err := p.primary(d)
	if err != nil {
		return nil, err
	}
	return &node{op: o, l: x}, nil
}

func (p *parser) primary(depth int) (*node, error) {
	t := p.next()
	switch t.kind {
	case tokLParen:
		d, err := p.deeper(depth)
		if err != nil {
			return nil, err
		}
		x, err := p.expression(d)
		if err != nil {
			return nil, err
		}
		if err := p.expect(tokRParen); err != nil {
			return nil, err
		}
		return x, nil
	case tokInt:
		return &node{op: opLit, lit: val{k: kInt, i: t.i}}, nil
	case tokFloat:
		return &node{op: opLit, lit: val{k: kFloat, f: t.f}}, nil
	case tokString:
		return &node{op: opLit, lit: val{k: kString, b: []byte(t.s)}}, nil
	case tokBinary:
		return &node{op: opLit, lit: val{k: kBinary, b: []byte(t.s)}}, nil
	case tokTrue:
		return &node{op: opLit, lit: valTrue}, nil
	case tokFalse:
		return &node{op: opLit, lit: valFalse}, nil
	case tokIdent:
		return &node{op: opField, ref: t.ref}, nil
	case tokUTC:
		if err := p.expect(tokLParen); err != nil {
			return nil, err
		}
		if err := p.expect(tokRParen); err != nil {
			return nil, err
		}
		return &node{op: opUTC}, nil
	}
	return nil, p.unexpected(t)
}

// ---- evaluation ----

// eval evaluates n; kNull stands for unknown.
func eval(n *node, v *msgView) val {
	switch n.op {
	case opLit:
		return n.lit
	case opField:
		return v.field(&n.ref)
	case opUTC:
		if v.nowMillis == 0 {
			v.nowMillis = time.Now().UnixMilli()
		}
		return val{k: kInt, i: v.nowMillis}
	case opAnd:
		l := truth(eval(n.l, v))
		if l == tFalse {
			return valFalse
		}
		r := truth(eval(n.r, v))
		switch {
		case r == tFalse:
			return valFalse
		case l == tTrue && r == tTrue:
			return valTrue
		}
		return valNull
	case opOr:
		l := truth(eval(n.l, v))
		if l == tTrue {
			return valTrue
		}
		r := truth(eval(n.r, v))
		switch {
		case r == tTrue:
			return valTrue
		case l == tFalse && r == tFalse:
			return valFalse
		}
		return valNull
	case opNot:
		switch truth(eval(n.l, v)) {
		case tTrue:
			return valFalse
		case tFalse:
			return valTrue
		}
		return valNull
	case opEq, opNe, opLt, opLe, opGt, opGe:
		return compare(n.op, eval(n.l, v), eval(n.r, v))
	case opAdd, opSub, opMul, opDiv, opMod:
		return arithmetic(n.op, eval(n.l, v), eval(n.r, v))
	case opNeg, opPos:
		x := eval(n.l, v)
		switch {
		case x.k == kFloat && n.op == opNeg:
			x.f = -x.f
		case x.k == kInt && n.op == opNeg:
			if x.i == math.MinInt64 {
				return val{k: kFloat, f: -float64(x.i)}
			}
			x.i = -x.i
		case x.k != kInt && x.k != kFloat:
			return valNull
		}
		return x
	case opLike:
		x := eval(n.l, v)
		if x.k != kString {
			return valNull
		}
		m, ok := n.like.match(x.b)
		if !ok {
			return valNull
		}
		return boolVal(m)
	case opIn:
		x := eval(n.l, v)
		if x.k == kNull {
			return valNull
		}
		for _, item := range n.list {
			if equal(x, eval(item, v)) {
				return valTrue
			}
		}
		return valFalse
	case opIsNull:
		return boolVal(eval(n.l, v).k == kNull)
	}
	return valNull
}

type truthValue uint8

const (
	tUnknown truthValue = iota
	tTrue
	tFalse
)

// truth is x as a condition: a value that is not a boolean is unknown.
func truth(x val) truthValue {
	if x.k != kBool {
		return tUnknown
	}
	if x.i == 1 {
		return tTrue
	}
	return tFalse
}

func isNumber(x val) bool { return x.k == kInt || x.k == kFloat }

func asFloat(x val) float64 {
	if x.k == kInt {
		return float64(x.i)
	}
	return x.f
}

// equal is "=" on two known values: numbers by value, strings and binaries
// by bytes, booleans; values of different types are not equal.
func equal(a, b val) bool {
	switch {
	case a.k == kNull || b.k == kNull:
		return false
	case a.k == kInt && b.k == kInt:
		return a.i == b.i
	case isNumber(a) && isNumber(b):
		return asFloat(a) == asFloat(b)
	case a.k != b.k:
		return false
	case a.k == kBool:
		return a.i == b.i
	case a.k == kString || a.k == kBinary:
		return bytes.Equal(a.b, b.b)
	}
	return false
}

// order compares two values of a type that has an order (numbers,
// strings, binaries): -1, 0, 1, and ok false for others.
func order(a, b val) (int, bool) {
	switch {
	case a.k == kInt && b.k == kInt:
		switch {
		case a.i < b.i:
			return -1, true
		case a.i > b.i:
			return 1, true
		}
		return 0, true
	case isNumber(a) && isNumber(b):
		x, y := asFloat(a), asFloat(b)
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		case x == y:
			return 0, true
		}
		return 0, false // NaN
	case a.k == b.k && (a.k == kString || a.k == kBinary):
		return bytes.Compare(a.b, b.b), true
	}
	return 0, false
}

func compare(o op, a, b val) val {
	if a.k == kNull || b.k == kNull {
		return valNull
	}
	switch o {
	case opEq:
		return boolVal(equal(a, b))
	case opNe:
		comparable := a.k == b.k || isNumber(a) && isNumber(b)
		return boolVal(comparable && a.k != kOther && !equal(a, b))
	}
	c, ok := order(a, b)
	if !ok {
		return valFalse
	}
	switch o {
	case opLt:
		return boolVal(c < 0)
	case opLe:
		return boolVal(c <= 0)
	case opGt:
		return boolVal(c > 0)
	}
	return boolVal(c >= 0)
}

func arithmetic(o op, a, b val) val {
	if !isNumber(a) || !isNumber(b) {
		return valNull
	}
	if a.k == kInt && b.k == kInt {
		x, y := a.i, b.i
		switch o {
		case opAdd:
			if s := x + y; (s > x) == (y > 0) {
				return val{k: kInt, i: s}
			}
		case opSub:
			if s := x - y; (s < x) == (y > 0) {
				return val{k: kInt, i: s}
			}
		case opMul:
			if hi, lo := bits.Mul64(uint64(abs(x)), uint64(abs(y))); hi == 0 && lo <= math.MaxInt64 && x != math.MinInt64 && y != math.MinInt64 {
				p := int64(lo)
				if (x < 0) != (y < 0) {
					p = -p
				}
				return val{k: kInt, i: p}
			}
		case opMod:
			if y == 0 {
				return valNull
			}
			return val{k: kInt, i: x % y}
		}
	}
	if o == opMod {
		return valNull // modulo is for integers only
	}
	x, y := asFloat(a), asFloat(b)
	switch o {
	case opAdd:
		return val{k: kFloat, f: x + y}
	case opSub:
		return val{k: kFloat, f: x - y}
	case opMul:
		return val{k: kFloat, f: x * y}
	}
	if y == 0 {
		return valNull
	}
	return val{k: kFloat, f: x / y}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
