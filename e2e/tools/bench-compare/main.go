// bench-compare: operator-registry's own file-based catalog loader, timed, for `make
// bench-compare` (crates/resolver/benches/bench_compare.rs runs it as a subprocess).
//
// Usage: bench-compare <catalog-dir>
//
// Loads the folder with declcfg.LoadFS (os.DirFS, default concurrency: one worker per CPU),
// converts it with declcfg.ConvertToModel (which validates the model), and prints one JSON
// line: the time of each step, the CPU time they took (all threads), the counts (packages,
// channels, distinct bundles), and the process's peak RSS (getrusage ru_maxrss, KiB on Linux).
// Exit code 1 and the error on stderr when the catalog does not load.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/operator-framework/operator-registry/alpha/declcfg"
)

type result struct {
	LoadNs     int64 `json:"load_ns"`
	ConvertNs  int64 `json:"convert_ns"`
	Packages   int   `json:"packages"`
	Channels   int   `json:"channels"`
	Bundles    int   `json:"bundles"`
	CPUNs      int64 `json:"cpu_ns"`
	MaxRSSKiB  int64 `json:"max_rss_kib"`
	GoMaxProcs int   `json:"cpus"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: bench-compare <catalog-dir>")
		os.Exit(2)
	}
	cpuStart, _ := usage()
	start := time.Now()
	cfg, err := declcfg.LoadFS(context.Background(), os.DirFS(os.Args[1]))
	if err != nil {
		fmt.Fprintln(os.Stderr, "LoadFS:", err)
		os.Exit(1)
	}
	loaded := time.Now()
	m, err := declcfg.ConvertToModel(*cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ConvertToModel:", err)
		os.Exit(1)
	}
	converted := time.Now()

	r := result{
		LoadNs:     loaded.Sub(start).Nanoseconds(),
		ConvertNs:  converted.Sub(loaded).Nanoseconds(),
		Packages:   len(m),
		GoMaxProcs: runtime.GOMAXPROCS(0),
	}
	for _, pkg := range m {
		r.Channels += len(pkg.Channels)
		bundles := map[string]struct{}{}
		for _, ch := range pkg.Channels {
			for name := range ch.Bundles {
				bundles[name] = struct{}{}
			}
		}
		r.Bundles += len(bundles)
	}
	cpuEnd, maxRSS := usage()
	r.CPUNs = cpuEnd - cpuStart
	r.MaxRSSKiB = maxRSS
	out, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

// usage returns the process's CPU time so far (user + system, all threads) in nanoseconds and
// its peak RSS in KiB.
func usage() (int64, int64) {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0, 0
	}
	return u.Utime.Nano() + u.Stime.Nano(), u.Maxrss
}
