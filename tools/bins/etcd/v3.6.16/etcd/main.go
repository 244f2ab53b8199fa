// Command etcd is the etcd server, built from the go.etcd.io/etcd/server/v3
// module pinned in ../go.mod (the root module go.etcd.io/etcd/v3, which holds
// upstream's main, cannot be required because of its replace directives).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
