package sim

import "math/rand/v2"

// Stream returns the random stream called name derived from master: each subsystem (workload,
// router, engine, failures) draws from its own stream, so adding draws to one never shifts
// another, and the same master seed always gives the same streams.
func Stream(master uint64, name string) *rand.Rand {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return rand.New(rand.NewPCG(splitmix(master^h), splitmix(h+master+0x9e3779b97f4a7c15)))
}

// SubSeed returns a seed for the stream called name, for components that take a seed rather
// than a *rand.Rand.
func SubSeed(master uint64, name string) uint64 { return Stream(master, name).Uint64() }

func splitmix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
