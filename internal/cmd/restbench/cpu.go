package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
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
	// f[0] is the state, the 3rd field: utime is f[11], stime f[12].
	f, err := statFields(stat, 13)
	if err != nil {
		return 0, err
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	s, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad stat %q", stat)
	}
	return (u + s) * 1e6 / clockTicks, nil
}

// statParent reads the parent's process id from the text of /proc/PID/stat: its 4th
// field.
func statParent(stat []byte) (int, error) {
	f, err := statFields(stat, 2)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(f[1])
}

// statFields returns the fields of the text of /proc/PID/stat after the command name
// in parentheses (which may hold spaces), from the 3rd, at least n of them.
func statFields(stat []byte, n int) ([]string, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("no command in %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < n {
		return nil, fmt.Errorf("short stat %q", stat)
	}
	return f, nil
}

// familyCPU returns the CPU time, in microseconds, that the process pid and its
// children have used (a PostgreSQL server: its postmaster, backends and background
// processes).
func familyCPU(pid int) float64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	total := 0.0
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		parent, err := statParent(b)
		if err != nil || (parent != pid && d != fmt.Sprintf("/proc/%d", pid)) {
			continue
		}
		if us, err := statCPU(b); err == nil {
			total += us
		}
	}
	return total
}

// commandCPU returns the CPU time, in microseconds, that every process whose command
// is name (postgres, redis-server) has used: the database's share of a call. Other
// clients of the same server count too, so it is only as clean as the machine.
func commandCPU(name string) float64 {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	total := 0.0
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != name {
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
