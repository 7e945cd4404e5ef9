//go:build race

package follow_test

// raceDetector: the race detector's shadow memory dwarfs and hides what a
// test of resident sizes measures.
const raceDetector = true
