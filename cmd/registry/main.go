// Command registry serves an OCI distribution registry on this machine,
// built from go-containerregistry's registry package: blobs on disk,
// manifests in memory. It is how the pull path (gauntlet run --push-to,
// a kind cluster whose containerd mirrors a registry) is proven here
// without a registry on the network: make registry builds it, and
// ci/registry-proof.sh runs it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:5001", "address to serve on (0.0.0.0:5001 for a kind cluster's nodes to reach it through the kind network's gateway)")
	dir := flag.String("dir", "", "folder for the blobs (default: a temporary one, removed at exit)")
	flag.Parse()
	if err := serve(*listen, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func serve(listen, dir string) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "gauntlet-registry-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(tmp) }()
		dir = tmp
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	s := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler:           registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(dir)), registry.Logger(log.New(os.Stderr, "registry: ", log.LstdFlags))),
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-stop
		_ = s.Close()
	}()
	log.Printf("registry: serving the OCI distribution API on %s, blobs in %s", l.Addr(), dir)
	if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
