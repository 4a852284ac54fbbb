package mcpgw

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorded is what a process reported, in order.
type recorded struct {
	mu     sync.Mutex
	order  []string
	data   bytes.Buffer
	stderr bytes.Buffer
	exit   struct {
		code           int
		stdout, stderr []byte
	}
	failed string
	done   chan struct{}
}

func newRecorded() *recorded { return &recorded{done: make(chan struct{})} }

func (r *recorded) note(what string) {
	if n := len(r.order); n == 0 || r.order[n-1] != what {
		r.order = append(r.order, what)
	}
}

func (r *recorded) onData(_ uint64, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("data")
	r.data.Write(b)
}

func (r *recorded) onStderr(_ uint64, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stderr.Write(b)
}

func (r *recorded) onEOF(uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note("eof")
}

func (r *recorded) onExit(_ uint64, code int, stdout, stderr []byte) {
	r.mu.Lock()
	r.note("exit")
	r.exit.code, r.exit.stdout, r.exit.stderr = code, append([]byte(nil), stdout...), append([]byte(nil), stderr...)
	r.mu.Unlock()
	close(r.done)
}

func (r *recorded) onExecFailed(_ uint64, reason string) { r.failed = reason }

func (r *recorded) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the process's exit was never reported")
	}
}

func run(t *testing.T, argv []string, mode stdinMode, stdin []byte) (*osProc, *recorded) {
	t.Helper()
	r := newRecorded()
	p, err := spawn(r, 1, argv, t.TempDir(), mode, stdin, false)
	if err != nil {
		t.Fatal(err)
	}
	return p, r
}

// A command's exit status, both outputs, a signal's 128+N, its stdin, its directory.
func TestSpawnReportsExitAndOutput(t *testing.T) {
	t.Parallel()
	_, r := run(t, []string{"sh", "-c", "pwd; printf err >&2; exit 7"}, stdinNull, nil)
	r.wait(t)
	if r.exit.code != 7 || !strings.HasPrefix(string(r.exit.stdout), os.TempDir()) || string(r.exit.stderr) != "err" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.exit.code, r.exit.stdout, r.exit.stderr)
	}
	_, r = run(t, []string{"sh", "-c", "kill -9 $$"}, stdinNull, nil)
	r.wait(t)
	if r.exit.code != 128+9 {
		t.Errorf("killed by SIGKILL: exit %d", r.exit.code)
	}
	in := bytes.Repeat([]byte("0123456789\x00\xff"), 100_000)
	_, r = run(t, []string{"cat"}, stdinBytes, in)
	r.wait(t)
	if !bytes.Equal(r.exit.stdout, in) || r.exit.code != 0 {
		t.Errorf("stdin of %d bytes came back as %d bytes, exit %d", len(in), len(r.exit.stdout), r.exit.code)
	}
	_, r = run(t, []string{"sh", "-c", "wc -c"}, stdinNull, nil)
	r.wait(t)
	if strings.TrimSpace(string(r.exit.stdout)) != "0" {
		t.Errorf("/dev/null as stdin: %q", r.exit.stdout)
	}
	if _, err := spawn(newRecorded(), 1, []string{"/nonexistent/program"}, "", stdinNull, nil, false); err == nil ||
		!strings.Contains(err.Error(), "/nonexistent/program") {
		t.Errorf("a program that does not exist: %v", err)
	}
	if _, err := spawn(newRecorded(), 1, []string{"no-such-program-anywhere"}, "", stdinNull, nil, false); err == nil {
		t.Error("a program not on PATH ran")
	}
}

// A held stdin stays open, empty, until the process exits; kill ends the process with
// everything it started.
func TestSpawnHoldAndKill(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	// cat on the held stdin would end at once were it closed or /dev/null.
	p, r := run(t, []string{"sh", "-c", "sleep 60 & echo $! > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; cat; wait"}, stdinHold, nil)
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		text, _ := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(text)))
	}
	select {
	case <-r.done:
		t.Fatal("the command ended although its stdin is held")
	default:
	}
	p.kill()
	r.wait(t)
	if r.exit.code != 128+9 {
		t.Errorf("killed: exit %d", r.exit.code)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(child)); err != nil {
			break
		}
		if stat, _ := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat"); strings.Contains(string(stat), ") Z") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command's child %d outlived the kill", child)
		}
	}
	p.kill() // after its exit: nothing is signalled
}

// A channel's output is reported as it comes, then its end, then its exit; its stdin takes
// writes in order and closes after them.
func TestSpawnChannel(t *testing.T) {
	t.Parallel()
	r := newRecorded()
	p, err := spawn(r, 1, []string{"sh", "-c", "cat; echo bye >&2; exit 3"}, "", stdinPipe, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := range 1000 {
		line := []byte(strconv.Itoa(i) + strings.Repeat(".", i%97) + "\n")
		want.Write(line)
		p.write(line)
	}
	p.closeInput()
	p.closeInput()
	r.wait(t)
	<-p.ended()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !bytes.Equal(r.data.Bytes(), want.Bytes()) || r.stderr.String() != "bye\n" || r.exit.code != 3 ||
		len(r.exit.stdout) != 0 {
		t.Errorf("data %d bytes (want %d), stderr %q, exit %d", r.data.Len(), want.Len(), r.stderr.String(), r.exit.code)
	}
	if got := strings.Join(r.order, " "); got != "data eof exit" {
		t.Errorf("reported in the order %s", got)
	}
}
