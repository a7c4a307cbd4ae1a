package filter

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// likePattern is a compiled LIKE pattern: "%" any sequence of characters,
// "_" one character, the escape character makes the next one literal.
type likePattern struct {
	parts []likePart
	// simple: no "_" and at most one "%": matched as exact, prefix,
	// suffix or both, on bytes, as RabbitMQ does (no UTF-8 check).
	simple bool
}

type likePart struct {
	kind byte // 'l' literal, '%' any sequence, '_' one character
	lit  []byte
}

func compileLike(pat string, esc rune) (likePattern, error) {
	var lp likePattern
	var lit []byte
	flush := func() {
		if lit != nil {
			lp.parts = append(lp.parts, likePart{kind: 'l', lit: lit})
			lit = nil
		}
	}
	percents, underscores := 0, 0
	for i := 0; i < len(pat); {
		r, n := utf8.DecodeRuneInString(pat[i:])
		i += n
		switch {
		case r == esc:
			if i == len(pat) {
				return lp, fmt.Errorf("escape character at the end")
			}
			r, n = utf8.DecodeRuneInString(pat[i:])
			i += n
			if r < 32 || r == 127 {
				return lp, fmt.Errorf("control character")
			}
			lit = utf8.AppendRune(lit, r)
		case r == '%':
			flush()
			if k := len(lp.parts); k == 0 || lp.parts[k-1].kind != '%' {
				lp.parts = append(lp.parts, likePart{kind: '%'})
			}
			percents++
		case r == '_':
			flush()
			lp.parts = append(lp.parts, likePart{kind: '_'})
			underscores++
		case r < 32 || r == 127:
			return lp, fmt.Errorf("control character")
		default:
			lit = utf8.AppendRune(lit, r)
		}
	}
	flush()
	lp.simple = underscores == 0 && percents <= 1
	return lp, nil
}

// match reports whether s matches; ok is false (unknown) for a subject
// that is not UTF-8 where a character count matters.
func (lp *likePattern) match(s []byte) (matched, ok bool) {
	if lp.simple {
		return lp.matchSimple(s), true
	}
	if !utf8.Valid(s) {
		return false, false
	}
	return matchParts(lp.parts, s), true
}

func (lp *likePattern) matchSimple(s []byte) bool {
	switch len(lp.parts) {
	case 0:
		return len(s) == 0
	case 1:
		if lp.parts[0].kind == '%' {
			return true
		}
		return bytes.Equal(s, lp.parts[0].lit)
	}
	// At most one '%': literal%, %literal, or literal%literal.
	var pre, suf []byte
	if lp.parts[0].kind == 'l' {
		pre = lp.parts[0].lit
	}
	if last := lp.parts[len(lp.parts)-1]; last.kind == 'l' {
		suf = last.lit
	}
	return len(s) >= len(pre)+len(suf) && bytes.HasPrefix(s, pre) && bytes.HasSuffix(s, suf)
}

// matchParts matches s (valid UTF-8) against parts: the usual wildcard
// algorithm that remembers the last "%" and retries from it, in time
// bounded by the product of the lengths (no exponential backtracking).
func matchParts(parts []likePart, s []byte) bool {
	pi, si := 0, 0
	star, starSi := -1, 0
	for {
		if pi < len(parts) {
			switch p := parts[pi]; p.kind {
			case '%':
				star, starSi = pi, si
				pi++
				continue
			case '_':
				if si < len(s) {
					_, n := utf8.DecodeRune(s[si:])
					si += n
					pi++
					continue
				}
			default:
				if bytes.HasPrefix(s[si:], p.lit) {
					si += len(p.lit)
					pi++
					continue
				}
			}
		} else if si == len(s) {
			return true
		}
		if star < 0 || starSi >= len(s) {
			return false
		}
		// Let the last "%" take one more character and retry from there.
		_, n := utf8.DecodeRune(s[starSi:])
		starSi += n
		pi, si = star+1, starSi
	}
}
