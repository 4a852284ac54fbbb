// Command hostbench measures one Go process holding many open sessions: it launches a few
// gateways on this machine (the Local backend), opens one session per client against them (one
// `mcpgw-gateway attach` process each), calls a tool across all of them, and prints
//
//	host sessions: 1000 open, library KiB per session: X, threads: T, calls/s: Z
//
// with a baseline beside each figure: the process's RSS and threads before the sessions, and the
// threads with a few sessions open. X is the growth of this process's own RSS per session (the
// attach processes are other processes: their memory is not in it). `make -C bindings/go bench`
// runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

func main() {
	log.SetFlags(0)
	sessions := flag.Int("sessions", 1000, "sessions to open")
	gateways := flag.Int("gateways", 4, "gateways they attach to")
	calls := flag.Int("calls", 3, "echo calls per session")
	parallel := flag.Int("parallel", 64, "operations at once")
	gateway := flag.String("gateway", "", "the mcpgw-gateway binary")
	server := flag.String("server", "", "the MCP test server binary (mcpgw-testserver)")
	flag.Parse()
	if *gateway == "" || *server == "" {
		log.Fatal("hostbench: -gateway and -server are required")
	}
	if err := raiseFileLimit(); err != nil {
		log.Fatal(err)
	}
	if err := run(*sessions, *gateways, *calls, *parallel, *gateway, *server); err != nil {
		log.Fatal("hostbench: ", err)
	}
}

// raiseFileLimit raises the open-file limit to its maximum: each session holds four descriptors
// (stdin, stdout, stderr, pidfd).
func raiseFileLimit() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return err
	}
	l.Cur = l.Max
	return syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
}

// status reads this process's RSS (KiB) and thread count.
func status() (rssKiB, threads int) {
	text, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(text), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "VmRSS:":
			rssKiB, _ = strconv.Atoi(f[1])
		case len(f) >= 2 && f[0] == "Threads:":
			threads, _ = strconv.Atoi(f[1])
		}
	}
	return rssKiB, threads
}

// settled is status after a collection, so that garbage does not count as growth.
func settled() (rssKiB, threads int) {
	runtime.GC()
	return status()
}

func run(sessions, gateways, calls, parallel int, gateway, server string) error {
	ctx := context.Background()
	root, err := os.MkdirTemp("", "mcpgw-hostbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)

	// The gateways, each with the test server registered.
	type gw struct {
		port  int
		token string
	}
	var gws []gw
	for i := range gateways {
		dir := filepath.Join(root, fmt.Sprintf("gateway-%d", i))
		c, err := mcpgw.NewClient(mcpgw.Local(dir), mcpgw.WithGatewayPath(gateway), mcpgw.WithStateDir(filepath.Join(dir, "state")))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		info, err := c.StartGateway(ctx)
		if err != nil {
			return err
		}
		defer c.StopGateway(ctx)
		defer c.Close()
		if err := c.AddMCP(ctx, mcpgw.StdioSpec("ts", server, "stdio")); err != nil {
			return err
		}
		gws = append(gws, gw{info.Port, info.TokenFile})
	}

	clients := make([]*mcpgw.Client, sessions)
	for i := range clients {
		g := gws[i%len(gws)]
		c, err := mcpgw.NewClient(mcpgw.Local(root), mcpgw.WithGatewayPath(gateway), mcpgw.WithPort(g.port),
			mcpgw.WithTokenFile(g.token), mcpgw.WithTimeout(120*time.Second), mcpgw.WithOpenTimeout(120*time.Second))
		if err != nil {
			return err
		}
		clients[i] = c
	}
	defer func() {
		each(clients, parallel, func(_ int, c *mcpgw.Client) error { return c.Close() })
	}()
	rss0, threads0 := settled()

	const few = 10
	if err := each(clients[:few], parallel, func(_ int, c *mcpgw.Client) error {
		_, err := c.OpenSession(ctx)
		return err
	}); err != nil {
		return fmt.Errorf("opening sessions: %w", err)
	}
	_, threadsFew := settled()
	began := time.Now()
	if err := each(clients[few:], parallel, func(_ int, c *mcpgw.Client) error {
		_, err := c.OpenSession(ctx)
		return err
	}); err != nil {
		return fmt.Errorf("opening sessions: %w", err)
	}
	opened := time.Since(began)
	rss1, threads1 := settled()

	began = time.Now()
	if err := each(clients, parallel, func(i int, c *mcpgw.Client) error {
		for k := range calls {
			want := fmt.Sprintf("session %d call %d", i, k)
			chunk, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": want})
			if err != nil {
				return err
			}
			if chunk.Text() != want {
				return fmt.Errorf("session %d answered %q for %q", i, chunk.Text(), want)
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("calling: %w", err)
	}
	took := time.Since(began)
	_, threads2 := status()
	open := 0
	for _, c := range clients {
		if c.Session() != nil {
			open++
		}
	}
	perSession := float64(rss1-rss0) / float64(sessions)
	fmt.Printf("host sessions: %d open, library KiB per session: %.1f, threads: %d, calls/s: %.0f\n",
		open, perSession, threads2, float64(sessions*calls)/took.Seconds())
	fmt.Printf("  baseline: RSS %d KiB with no session open, %d KiB with %d; threads %d with no session, %d with %d, %d with %d open before calling; %d sessions opened in %v, %d calls at %d at once in %v (Go, %d gateways)\n",
		rss0, rss1, sessions, threads0, threadsFew, few, threads1, sessions, sessions, opened.Round(time.Millisecond),
		sessions*calls, parallel, took.Round(time.Millisecond), len(gws))
	if open != sessions {
		return errors.New("not every session stayed open")
	}
	return nil
}

// each runs f on every client, at most parallel at once, and returns the first error.
func each(clients []*mcpgw.Client, parallel int, f func(int, *mcpgw.Client) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	slots := make(chan struct{}, parallel)
	for i, c := range clients {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if err := f(i, c); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}
