//go:build race

package channel_test

const raceEnabled = true
