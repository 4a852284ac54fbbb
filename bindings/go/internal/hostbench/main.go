// Command hostbench measures one Go process holding many open sessions: it launches a few
// gateways on this machine (the Local backend), opens one session per client against them (one
// `mcpgw-gateway attach` process each), calls a tool across all of them, and prints
//
//	host sessions: 1000 open, library KiB per session: X, threads: T, calls/s: Z
//
// with a baseline beside each figure: the same calls over ten sessions (threads, calls/s), and
// the process's RSS and threads with none open. X is the growth of this process's own RSS per
// session from ten sessions to all (the attach processes are other processes: their memory is not
// in it). `make -C bindings/go bench` runs it.
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
	rounds := flag.Int("calls", 3, "echo calls per session")
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
	if err := run(*sessions, *gateways, *rounds, *parallel, *gateway, *server); err != nil {
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

func run(sessions, gateways, rounds, parallel int, gateway, server string) error {
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
		// Deferred calls run last first: the gateway is stopped while its client is still open.
		defer c.Close()
		defer c.StopGateway(ctx)
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
	open := func(cs []*mcpgw.Client) error {
		return each(cs, parallel, func(_ int, c *mcpgw.Client) error {
			_, err := c.OpenSession(ctx)
			return err
		})
	}
	// calls makes total echo calls, call j on client j%len(cs), parallel at once, and returns
	// their rate.
	calls := func(cs []*mcpgw.Client, total int) (float64, error) {
		jobs := make([]*mcpgw.Client, total)
		for j := range jobs {
			jobs[j] = cs[j%len(cs)]
		}
		began := time.Now()
		err := each(jobs, parallel, func(j int, c *mcpgw.Client) error {
			want := fmt.Sprintf("call %d", j)
			chunk, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": want})
			if err == nil && chunk.Text() != want {
				err = fmt.Errorf("call %d answered %q", j, chunk.Text())
			}
			return err
		})
		return float64(total) / time.Since(began).Seconds(), err
	}

	// The baseline: a few sessions, as many calls in all, as many at once.
	const few = 10
	if err := open(clients[:few]); err != nil {
		return fmt.Errorf("opening sessions: %w", err)
	}
	rateFew, err := calls(clients[:few], rounds*sessions)
	if err != nil {
		return fmt.Errorf("calling: %w", err)
	}
	rssFew, threadsFew := settled()

	began := time.Now()
	if err := open(clients[few:]); err != nil {
		return fmt.Errorf("opening sessions: %w", err)
	}
	opened := time.Since(began)
	rss1, threads1 := settled()
	rate, err := calls(clients, rounds*sessions)
	if err != nil {
		return fmt.Errorf("calling: %w", err)
	}
	_, threads := status()
	n := 0
	for _, c := range clients {
		if c.Session() != nil {
			n++
		}
	}
	fmt.Printf("host sessions: %d open, library KiB per session: %.1f, threads: %d, calls/s: %.0f\n",
		n, float64(rss1-rssFew)/float64(sessions-few), threads, rate)
	fmt.Printf("  baseline (Go, %d gateways, %d calls at once): with %d sessions the same calls: threads %d, calls/s %.0f; "+
		"RSS %d KiB with none open, %d with %d, %d with %d; threads %d with none open, %d with %d before calling; %d sessions opened in %v\n",
		len(gws), parallel, few, threadsFew, rateFew, rss0, rssFew, few, rss1, sessions, threads0, threads1, sessions,
		sessions-few, opened.Round(time.Millisecond))
	if n != sessions {
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
