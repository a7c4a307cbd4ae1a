package storetest

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// StartChild re-executes the test binary, running no test, with env added
// to its environment: the package's TestMain runs the child's code when it
// sees its variable. It returns the command (SIGKILL it with
// cmd.Process.Kill, then cmd.Wait) and a scanner over the child's standard
// output, where the lines written before the kill can still be read.
func StartChild(t testing.TB, env ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(stdout)
}

// Kills is the number of SIGKILLs a crash test makes: the positive number
// in the environment variable env (CI and long runs set it), else def.
func Kills(env string, def int) int {
	if n, _ := strconv.Atoi(os.Getenv(env)); n > 0 {
		return n
	}
	return def
}
