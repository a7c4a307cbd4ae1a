//go:build !race

package router

// raceEnabled is true when the tests run under the race detector, which
// changes allocation counts (sync.Pool drops items at random).
const raceEnabled = false
