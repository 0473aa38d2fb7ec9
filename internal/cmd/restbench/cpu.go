package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// clockTicks is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on Linux).
const clockTicks = 100

// processCPU returns the CPU time (user and system, all threads) the process pid has
// used, in microseconds, read from /proc/PID/stat.
func processCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return statCPU(b)
}

// statCPU reads utime and stime from the text of /proc/PID/stat: the 14th and 15th
// fields, counted after the command name in parentheses, which may hold spaces.
func statCPU(stat []byte) (float64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command in %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is the state, the 3rd field: utime is f[11], stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat %q", stat)
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad stat %q", stat)
	}
	return (u + s) * 1e6 / clockTicks, nil
}

// commandCPU returns the CPU time, in microseconds, that every process whose command
// is name (postgres, redis-server; several joined by "+") has used: the database's
// share of a call. Other clients of the same server count too, so it is only as clean
// as the machine.
func commandCPU(name string) float64 {
	names := strings.Split(name, "+")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	total := 0.0
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil || !slices.Contains(names, strings.TrimSpace(string(comm))) {
			continue
		}
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		if us, err := statCPU(b); err == nil {
			total += us
		}
	}
	return total
}

// childrenCPU returns the CPU time, in microseconds, of this process's children that
// have ended and been waited for (wrk, after each drive).
func childrenCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// selfCPU returns this process's CPU time in microseconds (the Go load generator).
func selfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// loadAverage returns the one-minute load average, to warn about a busy machine.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
