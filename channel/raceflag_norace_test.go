//go:build !race

package channel_test

const raceEnabled = false
