package filter

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/epitaph-mq/epitaph/amqp10"
	"github.com/epitaph-mq/epitaph/annotations"
	"github.com/epitaph-mq/epitaph/router"
	"github.com/epitaph-mq/epitaph/value"
)

type sqlCase struct {
	expr string
	want bool
}

// runCases evaluates every case against the message tm.
func runCases(t *testing.T, tm testMsg, cases []sqlCase) {
	t.Helper()
	m := tm.build(t)
	for _, c := range cases {
		e, err := ParseSQL(c.expr)
		if !assert.NoError(t, err, "parse %q", c.expr) {
			continue
		}
		assert.Equal(t, c.want, e.Match(m, nil), "%q", c.expr)
	}
}

// The cases below are the filter-expressions SQL examples as RabbitMQ 4.3's
// own unit suite evaluates them against the same message (appProps).

func TestSQLLogicalOperators(t *testing.T) {
	runCases(t, testMsg{appProps: appProps()}, []sqlCase{
		{"country = 'UK' AND weight = 5", true},
		{"'UK' = country AND 5 = weight", true},
		{"country = 'France' OR weight < 6", true},
		{"NOT country = 'France'", true},
		{"country = 'UK' AND weight > 5", false},
		{"missing AND premium", false},
		{"active AND absent", false},
		{"NOT absent", false},
		{"premium OR absent", false},
		{"absent OR active", true},
		{"active OR absent", true},
		// A non-boolean operand is unknown: UNKNOWN OR TRUE is TRUE.
		{"percentage OR active", true},
		{"active OR percentage", true},
		{"NOT (absent IN ('v1', 'v2') AND active)", false},
		{"NOT (absent IN ('v1', 'v2') AND absent LIKE 'v3')", false},
		{"NOT (absent IN ('v1', 'v2') AND premium)", true},
		{"NOT (active AND absent IN ('v1', 'v2'))", false},
		{"NOT (active AND premium)", true},
		{"NOT (absent IN ('v1', 'v2') OR premium)", false},
		{"NOT (absent IN ('v1', 'v2') OR absent LIKE 'v3')", false},
		{"NOT (absent IN ('v1', 'v2') OR active)", false},
		{"NOT (NOT (absent IN ('v1', 'v2') OR active))", true},
		{"NOT (premium OR absent IN ('v1', 'v2'))", false},
		{"NOT (NOT (premium OR absent IN ('v1', 'v2')))", false},
		{"country = 'UK' AND (weight > 3 OR price < 20)", true},
		{"NOT (country = 'France' OR country = 'Germany')", true},
		{"country = 'UK' AND NOT active = TRUE", false},
		{"(country = 'US' OR country = 'UK') AND (weight > 2 AND weight < 10)", true},
	})
}

func TestSQLComparisonOperators(t *testing.T) {
	runCases(t, testMsg{appProps: appProps()}, []sqlCase{
		{"country = 'UK'", true},
		{"country = 'US'", false},
		{"country <> 'US'", true},
		{"country != 'US'", true},
		{"country <> 'UK'", false},
		{"country != 'UK'", false},
		{"weight > 3", true},
		{"weight > 5", false},
		{"country > 'DE'", true},
		{"country > 'US'", false},
		{"'Zurich' > city", true},
		{"weight < 10", true},
		{"weight < 5", false},
		{"country < 'US'", true},
		{"country < 'DE'", false},
		{"weight >= 5", true},
		{"weight >= 4", true},
		{"weight >= 6", false},
		{"country >= 'UK'", true},
		{"weight >= 5.0", true},
		{"weight >= 4.99", true},
		{"weight >= 5.01", false},
		{"price >= 10.5", true},
		{"price >= 10.51", false},
		{"price >= 10", true},
		{"price >= 11", false},
		{"weight <= 5", true},
		{"weight <= 4", false},
		{"price <= 10.6", true},
		{"price <= 10", false},
		{"country <= 'US'", true},
		{"country <= 'DE'", false},
		// Booleans compare with = and <> only; values of different types
		// are never equal and have no order.
		{"active = TRUE", true},
		{"premium = FALSE", true},
		{"premium <> FALSE", false},
		{"premium >= 'false'", false},
		{"premium <= 0", false},
		{"weight = '5'", false},
		{"weight >= '5'", false},
		{"country <= TRUE", false},
		{"country > 1", false},
		{"country <= 1", false},
		{"weight <> 'UK'", false},
	})
}

func TestSQLArithmetic(t *testing.T) {
	runCases(t, testMsg{appProps: appProps()}, []sqlCase{
		{"weight + 5 = 10", true},
		{"price + 4.5 = 15", true},
		{"weight - 2 = 3", true},
		{"price - 0.5 = 10", true},
		{"weight * 2 = 10", true},
		{"quantity * price * discount = 262.5", true},
		{"weight / 2 = 2.5", true},
		{"price / 2 = 5.25", true},
		{"quantity / 10 = 10", true},
		{"quantity / 10 = 10.000", true},
		{"weight % 2 = 1", true},
		{"quantity % weight = 0.00", true},
		{"score = quantity % quantity", true},
		{"quantity % percentage = 25", true},
		{"7 % temperature = 2", true},
		{"quantity % score = 0", false},
		{"101 % percentage % weight = 1", true},
		{"101 % (percentage % 30) = 11", true},
		{"(weight + 5) * 2 = 20", true},
		{"price / (weight - 3) = 5.25", true},
		{"+temperature = -5", true},
		{"-temperature = 5", true},
		{"6 + -weight = 1", true},
		{"6 - -weight = 11", true},
		{"+(-weight) = -5", true},
		{"-(-weight) = 5", true},
		{"+weight", false},
		{"+city", false},
		{"+city = 'London'", false},
		{"-absent", false},
		{"absent + 4 = 5", false},
		{"2 * absent = 0", false},
		{"weight / 0 > 0", false},
		{"0 / 0.0 = 0", false},
		{"0.0 / 1 = 0", true},
		{"price % 2 = 0.5", false}, // modulo is for integers
		{"country + weight = 'UK5'", false},
		{"active + premium = 1", false},
		// 64-bit overflow continues in decimals rather than wrapping.
		{"9223372036854775807 + 9223372036854775807 > 9223372036854775807", true},
		{"-9223372036854775807 - 2 < 0", true},
		{"4611686018427387904 * 4 > 0", true},
		{"(-9223372036854775807 - 1) % -1 = 0", true},
		{"-(-9223372036854775807 - 1) > 0", true},
		{"(-9223372036854775807 - 1) * -1 > 0", true},
	})
}

func TestSQLStringsAndBinaries(t *testing.T) {
	runCases(t, testMsg{appProps: appProps()}, []sqlCase{
		{"'UK''s' = 'UK''s'", true},
		{`"UK" = "UK"`, true},
		{`'UK' = "UK"`, true},
		{`country = "UK"`, true},
		{`"" = ''`, true},
		{`'a"b' = "a""b"`, true},
		{"0x48656C6C6F = 0x48656C6C6F", true},
		{"0x48656C6C6F = 0x48656C6C6F21", false},
		{"0xBB > 0xAA", true},
		{"weight = 0x05", false},
		{"0x01 + 0x02 = 0x03", false},
		{"0x48656C6C6F = 'Hello'", false}, // a binary is not a string
	})
	runCases(t, testMsg{appProps: value.Map{
		{Key: "data", Value: []byte("Hello")},
		{Key: "signature", Value: []byte{0xde, 0xad, 0xbe, 0xef}},
		{Key: "quote", Value: "UK's"},
	}}, []sqlCase{
		{"data = 0x48656C6C6F", true},
		{"signature IN (0xCAFEBABE, 0xDEADBEEF)", true},
		{"signature NOT IN (0xCAFEBABE, 0xFEEDFACE)", true},
		{"quote = 'UK''s'", true},
		{`quote = "UK's"`, true},
	})
}

func TestSQLLike(t *testing.T) {
	runCases(t, testMsg{appProps: appProps()}, []sqlCase{
		{"description LIKE '%test%'", true},
		{"description LIKE 'This is a %'", true},
		{"description LIKE '%a test message'", true},
		{"description LIKE 'T_i% a %e_%e_sa%'", true},
		{"description LIKE 'T_i% a %e_%e_sa'", false},
		{"description LIKE 'is a test message'", false},
		{"country LIKE 'UK'", true},
		{"country LIKE 'U_'", true},
		{"country LIKE '_K'", true},
		{"country LIKE 'UK%'", true},
		{"country LIKE '%UK'", true},
		{"country LIKE 'U%K'", true},
		{"country LIKE 'US'", false},
		{"country LIKE '_UK'", false},
		{"country LIKE 'UK_'", false},
		{"country LIKE 'U_K'", false},
		{"city LIKE 'New%'", false},
		{"product_id LIKE 'ABC\\_%' ESCAPE '\\'", true},
		{"product_id LIKE 'ABC\\%' ESCAPE '\\'", false},
		{"product_id LIKE 'ABC🥕_123' ESCAPE '🥕'", true},
		{"product_id LIKE 'ABC🥕%123' ESCAPE '🥕'", false},
		{"country NOT LIKE 'US'", true},
		{"country NOT LIKE 'U_'", false},
		{"country NOT LIKE '%U%'", false},
		{"country NOT LIKE 'U%S'", true},
		{"absent LIKE '%'", false},
		{"absent NOT LIKE '%'", false},
		{"missing NOT LIKE '%'", false},
		{"weight LIKE '5'", false},
		{"description LIKE '%test%' AND country = 'UK'", true},
	})
	for _, c := range []struct {
		subject, pattern string
		want             bool
	}{
		{"aa", "a%a", true},
		{"a", "a%a", false},
		{"", "", true},
		{"", "%%%", true},
		{"", "_", false},
		{"car🥕rot", "car_rot", true},
		{"car🥕rot", "___🥕___", true},
		{"car🥕rot", "%_🥕_%", true},
		{"car🥕rot", "car__rot", false},
		{"abcX", "%%X", true},
		{"abc", "%%X", false},
		{"xaxbx", "%%a%%b%%", true},
		{"xbxax", "%%a%%b%%", false},
		{"##.\\|()[]{} ^$*+???", "_#.\\|()[]{} ^$*+?%", true},
	} {
		tm := testMsg{appProps: value.Map{{Key: "k", Value: c.subject}}}
		assert.Equal(t, c.want, sqlMatch(t, "k LIKE '"+c.pattern+"'", tm), "%q LIKE %q", c.subject, c.pattern)
	}
	// LIKE on a binary is unknown.
	assert.False(t, sqlMatch(t, "k LIKE '%a'", testMsg{appProps: value.Map{{Key: "k", Value: []byte{0, 1, 'a'}}}}))
	assert.True(t, sqlMatch(t, "k LIKE 'z_%' ESCAPE 'z'", testMsg{appProps: value.Map{{Key: "k", Value: "_foo"}}}))
	assert.False(t, sqlMatch(t, "k LIKE 'z_%' ESCAPE 'z'", testMsg{appProps: value.Map{{Key: "k", Value: "foo"}}}))
}

func TestSQLInAndNull(t *testing.T) {
	runCases(t, testMsg{appProps: appProps()}, []sqlCase{
		{"country IN ('US', 'UK', 'France')", true},
		{"country IN ('UK')", true},
		{"country IN ('US', 'France')", false},
		{"'London' IN (city, country)", true},
		{"country NOT IN ('US', 'France', 'Germany')", true},
		{"country NOT IN ('US', 'UK', 'France')", false},
		{"missing IN ('UK', 'US')", false},
		{"absent NOT IN ('UK', 'US')", false},
		{"missing IS NULL", true},
		{"absent IS NULL", true},
		{"country IS NULL", false},
		{"country IS NOT NULL", true},
		{"missing IS NOT NULL", false},
		{"missing > 0", false},
		{"missing = missing", false},
		{"missing <> 0", false},
		{"missing AND TRUE", false},
		{"missing OR FALSE", false},
	})
	props := &amqp10.Properties{GroupSequence: ptr(uint32(10))}
	runCases(t, testMsg{props: props, appProps: appProps()}, []sqlCase{
		{"10.0 IN (TRUE, p.group_sequence)", true},
		{"10.0 NOT IN (TRUE, p.group_sequence)", false},
	})
	runCases(t, testMsg{header: &amqp10.Header{Priority: 11}, appProps: appProps()}, []sqlCase{
		{"price IN (h.priority - 0.5)", true},
		{"price IN (h.priority + 0.5)", false},
	})
}

func ptr[T any](v T) *T { return &v }

func TestSQLLiteralsAndPrecedence(t *testing.T) {
	runCases(t, testMsg{appProps: appProps()}, []sqlCase{
		{"5 = 5", true},
		{"10.5 = 10.5", true},
		{"0 = 0.0", true},
		{"weight = 5.0", true},
		{"TRUE", true},
		{"active", true},
		{"FALSE", false},
		{"premium", false},
		{"distance = 1.2E6", true},
		{"tiny_value = 3.5E-4", true},
		{"5.0E+2 = 500", true},
		{"-5.0E-2 = -0.05", true},
		{"large_value + tiny_value >= large_value", true},
		{"weight + 2 * 3 = 11", true},
		{"(weight + 2) * 3 = 21", true},
		{"weight + weight * quantity - -temperature / 2 = 502.5", true},
		{"NOT country = 'US' AND weight > 3", true},
		{"NOT country = 'US' OR country = 'France' AND weight > 3", true},
		{"weight = -(-81) % percentage -1", true},
		{"weight > 3 AND (price > 20 OR country = 'US')", false},
		{"((weight > 3) AND (price < -1)) OR ((country = 'UK') AND (city = 'London'))", true},
		{"country\t=\t'UK'\nAND\rweight\f>\t3", true},
		{"country='UK'AND weight=5", true},
		{"UTC() > 1000000000000", true},
		{"UTC ( ) < UTC() + 30000", true},
	})
	// Identifiers are case sensitive.
	runCases(t, testMsg{appProps: append(appProps(), value.KV{Key: "COUNTRY", Value: "France"})}, []sqlCase{
		{"COUNTRY = 'France'", true},
		{"country = 'France'", false},
	})
}

func TestSQLIdentifiers(t *testing.T) {
	ids := []string{"simple", "with_underscore_123", "🥕", "with    four    spaces", " ", "", "NOT", "-",
		"!@#$%^&*()_+~`|{}?<>", "[ key ]", "]", "][", "p.to"}
	var ap value.Map
	for _, id := range ids {
		ap = append(ap, value.KV{Key: id, Value: true})
	}
	runCases(t, testMsg{props: &amqp10.Properties{To: str("q1")}, appProps: ap}, []sqlCase{
		{"simple", true},
		{"application_properties.with_underscore_123", true},
		{"a.with_underscore_123", true},
		{"[with_underscore_123]", true},
		{"[🥕]", true},
		{"[with    four    spaces]", true},
		{"[ ]", true},
		{"[]", true},
		{"[NOT]", true},
		{"[-]", true},
		{"[!@#$%^&*()_+~`|{}?<>]", true},
		{"[[[ key ]]]", true},
		{"[]]]", true},
		{"[]][[]", true},
		{"properties.to = 'q1'", true},
		{"p.to = 'q1'", true},
		{"[p.to] = TRUE", true},
	})
}

func TestSQLSections(t *testing.T) {
	props := &amqp10.Properties{
		MessageID: "id-123", UserID: []byte{10, 11, 12}, To: str("to some queue"),
		Subject: str("some subject"), ReplyTo: str("reply to some topic"), CorrelationID: uint64(789),
		ContentType: ptr(value.Symbol("text/plain")), ContentEncoding: ptr(value.Symbol("deflate")),
		AbsoluteExpiryTime: ptr(value.Timestamp(1311999988888)), CreationTime: ptr(value.Timestamp(1311704463521)),
		GroupID: str("some group ID"), GroupSequence: ptr(uint32(999)), ReplyToGroupID: str("other group ID"),
	}
	runCases(t, testMsg{header: &amqp10.Header{Priority: 7, Durable: true}, props: props,
		appProps: value.Map{{Key: "key_1", Value: int8(-1)}}}, []sqlCase{
		{"h.priority > 5", true},
		{"header.priority = 7", true},
		{"h.durable", true},
		{"p.message_id = 'id-123'", true},
		{"p.message_id LIKE 'id-%'", true},
		{"p.user_id = 0x0A0B0C", true},
		{"p.to LIKE 'to some%'", true},
		{"p.subject IN ('some subject', 'other subject')", true},
		{"p.reply_to LIKE 'reply%topic'", true},
		{"p.correlation_id = 789", true},
		{"500 < p.correlation_id", true},
		{"p.content_type LIKE 'text/%'", true},
		{"'deflate' = p.content_encoding", true},
		{"p.absolute_expiry_time = 1311999988888", true},
		{"p.creation_time < 1311999988888", true},
		{"p.group_id LIKE 'some%ID'", true},
		{"p.group_sequence >= 999", true},
		{"p.group_sequence > 999", false},
		{"p.reply_to_group_id IS NOT NULL", true},
		{"-1.0 = key_1 AND 4 < header.priority AND properties.group_sequence > 90", true},
		{"a.key_1 = -1", true},
		{"UTC() >= p.creation_time", true},
	})
	runCases(t, testMsg{}, []sqlCase{
		{"h.priority = 4", true}, // the default priority
		{"p.subject IS NULL", true},
		{"h.durable", false},
	})
}

// TestSQLMessageAnnotations covers epitaph's message_annotations section and
// x-opt-deaths extension, on the dead-letter history as the broker keeps it.
func TestSQLMessageAnnotations(t *testing.T) {
	hist := annotations.Record(annotations.History{}, annotations.Event{
		Queue: "orders", Reason: annotations.ReasonRejected, Exchange: "shop", RoutingKeys: []string{"orders"},
		Time: value.Timestamp(1_700_000_000_000), Error: &annotations.DeathError{Condition: "app:invalid", Description: "no such product"},
	})
	hist = annotations.Record(hist, annotations.Event{Queue: "orders.retry", Reason: annotations.ReasonExpired,
		Exchange: "", RoutingKeys: []string{"orders.retry"}, Time: value.Timestamp(1_700_000_005_000), TTL: 5000, HasTTL: true})
	hist = annotations.Record(hist, annotations.Event{Queue: "orders.retry", Reason: annotations.ReasonExpired,
		Exchange: "", RoutingKeys: []string{"orders.retry"}, Time: value.Timestamp(1_700_000_010_000), TTL: 5000, HasTTL: true})
	anns := value.Map{{Key: annotations.HistoryKey{}, Value: &hist}, {Key: value.Symbol("x-trace"), Value: "abc"}}
	m := testMsg{anns: value.Map{{Key: value.Symbol("x-opt-origin"), Value: "web"}, {Key: value.Symbol("x-last-death-reason"), Value: "forged"}}}.build(t)
	m.Exchange, m.RoutingKeys = "dlx", []string{"orders.dlq"}
	for _, c := range []sqlCase{
		{"m.[x-first-death-reason] = 'rejected'", true},
		{"m.[x-first-death-queue] = 'orders'", true},
		{"m.[x-first-death-exchange] = 'shop'", true},
		{"m.[x-last-death-reason] = 'expired'", true}, // the history's, not the publisher's
		{"m.[x-last-death-queue] = 'orders.retry'", true},
		{"message_annotations.[x-last-death-exchange] = ''", true},
		{"m.[x-last-death-error-condition] IS NULL", true}, // the latest death had no error
		{"m.[x-opt-deaths] IS NOT NULL", true},
		{"m.[x-opt-deaths] = 'x'", false},
		{"m.[x-trace] = 'abc'", true},
		{"m.[x-opt-origin] = 'web'", true},
		{"m.[x-exchange] = 'dlx'", true},
		{"m.[x-routing-key] LIKE '%.dlq'", true},
		{"m.[x-missing] IS NULL", true},
		{"x-opt-deaths.reason = 'expired' AND x-opt-deaths.queue = 'orders.retry'", true},
		{"x-opt-deaths.count >= 2", true},
		{"x-opt-deaths.count > 2", false},
		{"x-opt-deaths.ttl = 5000", true},
		{"x-opt-deaths.first_time = 1700000005000 AND x-opt-deaths.last_time = 1700000010000", true},
		{"x-opt-deaths.exchange = ''", true},
	} {
		e, err := ParseSQL(c.expr)
		require.NoError(t, err, c.expr)
		assert.Equal(t, c.want, e.Match(m, anns), c.expr)
	}
	// The first death's error, while it is the latest.
	first := annotations.Record(annotations.History{}, annotations.Event{Queue: "orders", Reason: annotations.ReasonRejected,
		Error: &annotations.DeathError{Condition: "app:invalid", Description: "no such product"}})
	e, err := ParseSQL("m.[x-last-death-error-condition] = 'app:invalid' AND m.[x-last-death-error-description] LIKE 'no such%'")
	require.NoError(t, err)
	assert.True(t, e.Match(m, value.Map{{Key: annotations.HistoryKey{}, Value: &first}, {Key: annotations.ErrorKey{}}}))
	// Without a history, the publisher's annotations are what a consumer gets.
	e, err = ParseSQL("m.[x-last-death-reason] = 'forged' AND x-opt-deaths.count IS NULL")
	require.NoError(t, err)
	assert.True(t, e.Match(m, nil))
}

func TestSQLParseErrors(t *testing.T) {
	long := strings.Repeat("x", 4096) + " IS NULL"
	var ins []string
	for i := range 100 {
		ins = append(ins, "'"+strconv.Itoa(i)+"'")
	}
	manyTokens := "id IN (" + strings.Join(ins, ",") + ")"
	deep := strings.Repeat("(", 65) + "a" + strings.Repeat(")", 65)
	for _, expr := range []string{
		"", "\xff", "!!!", "AND NOT", "a = b = c", "(a", "a)", "a IN ()", "a IN ('x',)", "5 IS NULL",
		"(a) IS NULL", "a LIKE 5", "data LIKE 0x48", "a LIKE 'x' ESCAPE 'ab'",
		"id LIKE 'pattern*' ESCAPE '*'", "id LIKE '\n'", "id LIKE '%\r'", "id LIKE '!\r' ESCAPE '!'",
		long, manyTokens, deep, strings.Repeat("NOT ", 65) + "a", strings.Repeat("-(", 40) + "1" + strings.Repeat(")", 40),
		"header.invalid", "properties.invalid", "p.message-id", "m.", "d.abc", "delivery_annotations.abc", "f.abc",
		"footer.abc", "application-properties.foo = 'bar'", "my.key", "x-opt-deaths.nope",
		"data = 0x", "data = 0x1", "data = 0x123", "data = 0xG1", "data = 0x1a", "data = 0xab",
		"not", "Not", "and", "true", "True", "null", "utc", "upper", "exists", "nan", "inf", "date",
		"my$key", "$mykey", "_mykey", "1mykey", "[\n]", "[a", "[a[b]", "'unterminated", `"x`,
		"5. > 0", ".5 > 0", "5E2 > 0", "UTC(123)", "UTC('arg')", "UTC", "a + ", "- - a",
	} {
		_, err := ParseSQL(expr)
		assert.Error(t, err, "%q", expr)
	}
	// The limits themselves are allowed.
	for _, expr := range []string{
		strings.Repeat("x", 4088) + " IS NULL",
		strings.Repeat("(", 64) + "a" + strings.Repeat(")", 64),
		"id IN (" + strings.Join(ins[:97], ",") + ")",
	} {
		_, err := ParseSQL(expr)
		assert.NoError(t, err, "%.40q", expr)
	}
}

func TestSQLUTCIsNow(t *testing.T) {
	before := time.Now().Add(-30 * time.Second).UnixMilli()
	props := &amqp10.Properties{CreationTime: ptr(value.Timestamp(before)), AbsoluteExpiryTime: ptr(value.Timestamp(before + 3_600_000))}
	runCases(t, testMsg{props: props}, []sqlCase{
		{"UTC() >= p.creation_time", true},
		{"p.creation_time >= UTC()", false},
		{"UTC() < p.absolute_expiry_time", true},
		{"UTC() - properties.creation_time < 300000", true},
	})
}

// TestSQLFallbackWithoutFieldReader evaluates against a container that
// reads no single fields (another protocol's): the decoded sections serve.
func TestSQLFallbackWithoutFieldReader(t *testing.T) {
	m := testMsg{props: &amqp10.Properties{MessageID: "id-1", ContentType: ptr(value.Symbol("text/plain"))},
		appProps: appProps(), anns: value.Map{{Key: value.Symbol("x-a"), Value: int64(3)}}}.build(t)
	plain := &router.Message{Container: decodedOnly{m.Container}, Header: m.Header}
	for _, c := range []sqlCase{
		{"country = 'UK' AND weight = 5 AND p.message_id = 'id-1' AND p.content_type = 'text/plain'", true},
		{"m.[x-a] = 3", true},
		{"p.subject IS NULL", true},
	} {
		e, err := ParseSQL(c.expr)
		require.NoError(t, err)
		assert.Equal(t, c.want, e.Match(plain, nil), c.expr)
	}
}

// decodedOnly hides a container's FieldReader.
type decodedOnly struct{ router.Container }

func TestSQLErrorsWrapInvalid(t *testing.T) {
	_, _, err := Parse(value.Map{{Key: value.Symbol("sql-filter"), Value: &value.Described{Descriptor: SQLFilterCode, Value: "a ="}}}, DefaultLimits())
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "sql-filter")
	assert.Contains(t, err.Error(), "amqp:sql-filter")
	assert.True(t, errors.Is(err, ErrInvalid))
}
