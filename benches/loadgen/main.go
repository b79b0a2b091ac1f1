// loadgen: many Kafka connections, each a closed loop of one pre-encoded request frame (issue 38, item 3).
//
// A load generator whose own CPU per request is small: the frame is encoded once by the caller (klog's protocol
// codec, benches/bench_request_cost.py), each connection is a goroutine that writes it, reads the answer's size
// prefix and skips the answer, and times the round trip. Standard library only.
//
//	loadgen -addr 127.0.0.1:9092 -frame produce.bin -connections 500 -warmup 2 -seconds 10
//
// Connects, runs -warmup seconds unmeasured, prints the line "start" (the caller reads the broker's CPU then), runs
// -seconds measured and prints one JSON object: requests, seconds, requests_per_s, latency percentiles (ms) and the
// process's own CPU seconds over the measured part (getrusage: user and system), so a reader sees the client's cost
// beside the broker's.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"
)

type result struct {
	Requests     int64   `json:"requests"`
	Seconds      float64 `json:"seconds"`
	RequestsPerS float64 `json:"requests_per_s"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	P999Ms       float64 `json:"p999_ms"`
	CPUUserS     float64 `json:"cpu_user_s"`
	CPUSysS      float64 `json:"cpu_sys_s"`
	Errors       int     `json:"errors"`
	FirstError   string  `json:"first_error,omitempty"`
}

// maxAnswerBytes bounds the answer a connection reads (a broker that sends a bogus size prefix fails the run).
const maxAnswerBytes = 64 << 20

// answerGrace bounds how long past the end a connection waits for its last answer (a broker that stopped
// answering fails the run instead of hanging it).
const answerGrace = 30 * time.Second

func cpuSeconds() (float64, float64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime), tv(ru.Stime)
}

func loop(conn net.Conn, frame []byte, measureAt, stopAt time.Time, lat *[]time.Duration) error {
	head := make([]byte, 4)
	buf := make([]byte, 1<<16)
	if err := conn.SetDeadline(stopAt.Add(answerGrace)); err != nil {
		return err
	}
	for {
		t0 := time.Now()
		if !t0.Before(stopAt) {
			return nil
		}
		if _, err := conn.Write(frame); err != nil {
			return err
		}
		if _, err := io.ReadFull(conn, head); err != nil {
			return err
		}
		size := int(binary.BigEndian.Uint32(head))
		if size < 0 || size > maxAnswerBytes {
			return fmt.Errorf("answer size %d out of bounds", size)
		}
		if size > len(buf) {
			buf = make([]byte, size)
		}
		if _, err := io.ReadFull(conn, buf[:size]); err != nil {
			return err
		}
		if !t0.Before(measureAt) {
			*lat = append(*lat, time.Since(t0))
		}
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "broker host:port")
	framePath := flag.String("frame", "", "file holding one request frame (size prefix included)")
	connections := flag.Int("connections", 500, "concurrent connections")
	seconds := flag.Float64("seconds", 10, "how long to measure")
	warmup := flag.Float64("warmup", 2, "how long to run before measuring")
	flag.Parse()
	frame, err := os.ReadFile(*framePath)
	if err != nil || len(frame) < 8 {
		fmt.Fprintf(os.Stderr, "loadgen: cannot read a frame from %q: %v\n", *framePath, err)
		os.Exit(2)
	}
	conns := make([]net.Conn, *connections)
	for i := range conns { // connect first: set-up is not part of the timed run
		c, err := net.Dial("tcp", *addr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "loadgen: connect %d: %v\n", i, err)
			os.Exit(1)
		}
		conns[i] = c
	}
	lats := make([][]time.Duration, len(conns))
	errs := make([]error, len(conns))
	measureAt := time.Now().Add(time.Duration(*warmup * float64(time.Second)))
	stopAt := measureAt.Add(time.Duration(*seconds * float64(time.Second)))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func(i int, c net.Conn) {
			defer wg.Done()
			errs[i] = loop(c, frame, measureAt, stopAt, &lats[i])
		}(i, c)
	}
	time.Sleep(time.Until(measureAt))
	u0, s0 := cpuSeconds()
	start := time.Now()
	fmt.Println("start")
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	u1, s1 := cpuSeconds()

	var all []time.Duration
	res := result{Seconds: elapsed, CPUUserS: u1 - u0, CPUSysS: s1 - s0}
	for i, l := range lats {
		all = append(all, l...)
		if errs[i] != nil {
			res.Errors++
			if res.FirstError == "" {
				res.FirstError = errs[i].Error()
			}
		}
	}
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	res.Requests = int64(len(all))
	res.RequestsPerS = float64(len(all)) / elapsed
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(p*float64(len(all)-1))]) / 1e6
	}
	res.P50Ms, res.P99Ms, res.P999Ms = pct(0.50), pct(0.99), pct(0.999)
	out, _ := json.Marshal(res)
	fmt.Println(string(out)) // before closing: the caller reads the broker's CPU on this line
	for _, c := range conns {
		c.Close()
	}
	if res.Errors > 0 {
		os.Exit(1)
	}
}
