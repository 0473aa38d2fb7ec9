package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Under -callgrind, each server process runs under valgrind's callgrind, and each drive
// counts the instructions the process executed in user space (every thread: the
// handler, net/http, the scheduler, the garbage collector), divided by the calls it
// answered. Unlike CPU time, the count does not depend on what else the machine runs.
// The kernel's work (the syscalls, the loopback TCP) is not counted.

// callgrindCommand returns the command that runs name with args under callgrind, its
// profiles written into dir. Asynchronous preemption is off: its signals break
// callgrind's bookkeeping of Go's threads. So is the runtime's use of RDTSCP: valgrind
// reports the instruction to the program even on a processor that lacks it (a virtual
// machine's may), where the runtime's first read of the cycle counter, under a
// contended lock, then dies of SIGILL.
func callgrindCommand(dir, server, name string, args ...string) *exec.Cmd {
	out := filepath.Join(dir, strings.ReplaceAll(server, ":", "-")+".callgrind.%p")
	cmd := exec.Command("valgrind", append([]string{"-q", "--tool=callgrind", "--callgrind-out-file=" + out, name}, args...)...)
	cmd.Env = append(os.Environ(), "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off")
	return cmd
}

// zeroInstructions sets the server's instruction count to zero, before a drive.
func (s *server) zeroInstructions() error {
	return exec.Command("callgrind_control", "-z", strconv.Itoa(s.cmd.Process.Pid)).Run()
}

// instructions returns the instructions the server executed since its count was last
// zeroed: callgrind_control dumps them into a new file of dir, whose totals line it
// reads.
func (s *server) instructions(dir string) (float64, error) {
	pid := strconv.Itoa(s.cmd.Process.Pid)
	if err := exec.Command("callgrind_control", "-d", pid).Run(); err != nil {
		return 0, fmt.Errorf("callgrind_control -d: %w", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, strings.ReplaceAll(s.name, ":", "-")+".callgrind."+pid+".*"))
	var newest string
	var newestN int
	for _, f := range files {
		if n, err := strconv.Atoi(f[strings.LastIndexByte(f, '.')+1:]); err == nil && n > newestN {
			newest, newestN = f, n
		}
	}
	if newest == "" {
		return 0, fmt.Errorf("no callgrind dump of process %s in %s", pid, dir)
	}
	f, err := os.Open(newest)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "totals:"); ok {
			return strconv.ParseFloat(strings.Fields(v)[0], 64)
		}
	}
	return 0, fmt.Errorf("%s has no totals line", newest)
}
