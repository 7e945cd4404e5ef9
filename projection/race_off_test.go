//go:build !race

package projection

// raceEnabled: the race detector slows CPU-bound tests several times.
const raceEnabled = false
