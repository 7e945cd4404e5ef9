//go:build race

package capturetest

// raceEnabled is true in a build with the race detector.
const raceEnabled = true
