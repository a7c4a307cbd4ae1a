//go:build race

package deadletter

// raceEnabled is true when the tests run under the race detector, which
// changes allocation counts (sync.Pool drops items at random).
const raceEnabled = true
