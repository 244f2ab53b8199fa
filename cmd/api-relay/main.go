// Command api-relay is the in-cluster half of the API proxy's relay: the
// operator under test connects to it as to its API server, and it hands
// each connection to the harness through a tunnel the harness opened over
// a port-forward (package apirelay). gauntlet run deploys it when the
// cluster's pods cannot reach the machine the proxy runs on.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gauntlet-dev/gauntlet/framework/apirelay"
)

func main() {
	clients := flag.String("listen", ":8443", "address the operator's connections arrive at")
	tunnels := flag.String("tunnels", ":9443", "address the harness's tunnels arrive at, through a port-forward")
	wait := flag.Duration("wait", 30*time.Second, "how long a connection waits for a tunnel before it is closed")
	flag.Parse()
	logger := log.New(os.Stderr, "", log.LstdFlags|log.Lmicroseconds)
	if err := run(*clients, *tunnels, *wait, logger); err != nil {
		logger.Fatal(err)
	}
}

func run(clients, tunnels string, wait time.Duration, logger *log.Logger) error {
	cl, err := net.Listen("tcp", clients)
	if err != nil {
		return fmt.Errorf("listening for the operator: %w", err)
	}
	tl, err := net.Listen("tcp", tunnels)
	if err != nil {
		return fmt.Errorf("listening for the harness's tunnels: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	logger.Printf("relaying connections on %s through the tunnels that arrive on %s (protocol %d)", cl.Addr(), tl.Addr(), apirelay.Version)
	r := &apirelay.Relay{Clients: cl, Tunnels: tl, Wait: wait, Logf: logger.Printf}
	return r.Serve(ctx)
}
