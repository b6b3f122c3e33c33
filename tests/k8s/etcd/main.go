// Command etcd runs an embedded single-member etcd for the test control plane.
//
// Usage: etcd -data-dir DIR -listen-client URL -listen-peer URL
// It prints "ready" once the server serves clients and exits on SIGTERM/SIGINT.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	dataDir := flag.String("data-dir", "", "data directory")
	client := flag.String("listen-client", "http://127.0.0.1:2379", "client URL")
	peer := flag.String("listen-peer", "http://127.0.0.1:2380", "peer URL")
	flag.Parse()
	if *dataDir == "" {
		log.Fatal("-data-dir is required")
	}
	cu, err := url.Parse(*client)
	if err != nil {
		log.Fatalf("-listen-client: %v", err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		log.Fatalf("-listen-peer: %v", err)
	}
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = *dataDir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = fmt.Sprintf("%s=%s", cfg.Name, pu.String())
	cfg.LogLevel = "warn"
	// Tests compact on purpose to expire watches; keep automatic compaction off.
	cfg.AutoCompactionRetention = "0"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("start etcd: %v", err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		log.Fatal("etcd did not become ready within 60s")
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-e.Err():
		log.Fatalf("etcd: %v", err)
	case <-sig:
	}
}
