// A gRPC backend for benches/grpc-unary/run.sh: the standard health service (always SERVING) and
// server reflection, over h2c on the address given as the first argument. Benchmark
// infrastructure only; the product is Rust.
package main

import (
	"log"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
)

func main() {
	addr := "127.0.0.1:18291"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	server := grpc.NewServer()
	healthpb.RegisterHealthServer(server, health.NewServer())
	reflection.Register(server)
	log.Fatal(server.Serve(listener))
}
