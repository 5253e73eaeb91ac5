// Command etcd is the real etcd server (go.etcd.io/etcd/server/v3, 3.6 line),
// built in its own module so its dependency versions stay those etcd was
// released with, independent of the Kubernetes module next door.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
