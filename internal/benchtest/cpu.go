package benchtest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CPUClock returns CPU time consumed so far by something: a process, or this one.
type CPUClock func() time.Duration

// SelfCPU is this process's CPU time, user and system.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ProcessCPU returns a clock of process pid's CPU time, user and system, read from
// /proc/PID/stat (Linux); it reads 0 where that file is missing.
func ProcessCPU(pid int) CPUClock {
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	return func() time.Duration {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0
		}
		// The command name, in parentheses, may hold spaces: the fields follow its ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			return 0
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(utime+stime) * time.Second / clockTicks
	}
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat times: 100 on every Linux
// configuration in use.
const clockTicks = 100
