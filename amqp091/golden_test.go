package amqp091

import (
	"bytes"
	"encoding/hex"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGoldenRabbitMQTableCodec is the table vector of RabbitMQ's own codec
// test (unit_amqp091_content_framing_SUITE:table_codec): rabbit_binary_generator
// writes exactly these octets for this table and rabbit_binary_parser reads
// them back.
func TestGoldenRabbitMQTableCodec(t *testing.T) {
	table := Table{
		{"longstr", "Here is a long string"},
		{"signedint", int32(12345)},
		{"decimal", Decimal{Scale: 3, Value: 123456}},
		{"timestamp", Timestamp(109876543209876)},
		{"table", Table{{"one", int32(54321)}, {"two", "A long string"}}},
		{"byte", int8(-128)},
		{"long", int64(1234567890)},
		{"short", int16(655)},
		{"bool", true},
		{"binary", Binary("a binary string")},
		{"unsignedbyte", uint8(250)},
		{"unsignedshort", uint16(65530)},
		{"unsignedint", uint32(4294967290)},
		{"void", nil},
		{"array", Array{int32(54321), "A long string"}},
	}
	want := wire(`
		07 "longstr"       "S" 00000015 "Here is a long string"
		09 "signedint"     "I" 00003039
		07 "decimal"       "D" 03 0001e240
		09 "timestamp"     "T" 000063eea053c194
		05 "table"         "F" 0000001f
		   03 "one" "I" 0000d431
		   03 "two" "S" 0000000d "A long string"
		04 "byte"          "b" 80
		04 "long"          "l" 00000000499602d2
		05 "short"         "s" 028f
		04 "bool"          "t" 01
		06 "binary"        "x" 0000000f "a binary string"
		0c "unsignedbyte"  "B" fa
		0d "unsignedshort" "u" fffa
		0b "unsignedint"   "i" fffffffa
		04 "void"          "V"
		05 "array"         "A" 00000017
		   "I" 0000d431
		   "S" 0000000d "A long string"`)
	got, err := AppendTable(nil, table)
	require.NoError(t, err)
	require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got[4:]))
	require.Equal(t, uint32(len(want)), uint32(got[0])<<24|uint32(got[1])<<16|uint32(got[2])<<8|uint32(got[3]))
	back, err := ParseTable(want)
	require.NoError(t, err)
	require.Equal(t, table, back)
}

// TestGoldenRabbitMQContentFraming follows RabbitMQ's content_framing test:
// with frame-max 11 (three octets of payload a frame) a body is split into
// frames no larger than frame-max, whose sizes add up to the header's body
// size; frame-max 4096 takes a small body in one frame and an empty body in
// none.
func TestGoldenRabbitMQContentFraming(t *testing.T) {
	for _, tc := range []struct {
		frameMax uint32
		body     string
		frames   int
	}{
		{4096, "", 0},
		{4096, "Easy", 1},
		{11, "One", 1},
		{11, "More than one frame", 7},
	} {
		out, err := AppendContent(nil, 1, tc.frameMax, &BasicDeliver{}, &Properties{}, []byte(tc.body))
		require.NoError(t, err)
		fr := NewFrameReader(bytes.NewReader(out))
		fr.SetFrameMax(0) // the method and header frames exceed frame-max 11
		_, err = fr.ReadFrame()
		require.NoError(t, err)
		f, err := fr.ReadFrame()
		require.NoError(t, err)
		h, err := ParseContentHeader(f.Payload)
		require.NoError(t, err)
		require.Equal(t, uint64(len(tc.body)), h.BodySize)
		fr.SetFrameMax(tc.frameMax)
		var body []byte
		n := 0
		for len(body) < len(tc.body) {
			f, err := fr.ReadFrame()
			require.NoError(t, err)
			require.Equal(t, FrameBody, f.Type)
			require.LessOrEqual(t, len(f.Payload)+FrameOverhead, int(tc.frameMax))
			body = append(body, f.Payload...)
			n++
		}
		require.Equal(t, tc.body, string(body))
		require.Equal(t, tc.frames, n, "frames for %q at frame-max %d", tc.body, tc.frameMax)
		_, err = fr.ReadFrame()
		require.ErrorIs(t, err, io.EOF)
	}
}
