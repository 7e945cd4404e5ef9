//go:build race

package node

// raceEnabled: the race detector slows decoding large requests many times.
const raceEnabled = true
