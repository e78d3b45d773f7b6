// loadgen POSTs JSON objects to a kube-apiserver as fast as it accepts them: the bench's bulk
// creator (nodes, pods, PodGroups "created at once") and its bare binder (the ceiling: pending
// pods bound through pods/binding with no scheduling at all). Standard library only.
//
//	loadgen -server URL -token T -ca FILE [-concurrency 64] < requests.jsonl > done.tsv
//
// Each input line is {"key": "...", "path": "/api/v1/...", "body": {...}}; requests start in
// input order on -concurrency workers sharing one HTTP/2 connection (like client-go). Each
// output line is "key<TAB>unix-nanoseconds when the answer arrived<TAB>HTTP status". A summary
// (count, errors, seconds, requests/s) goes to stderr; the exit status is 1 if any request
// failed with a status other than 409 AlreadyExists.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

type request struct {
	Key  string          `json:"key"`
	Path string          `json:"path"`
	Body json.RawMessage `json:"body"`
}

type result struct {
	key    string
	doneAt int64
	status int
	err    string
}

func main() {
	server := flag.String("server", "", "API server URL")
	token := flag.String("token", "", "bearer token")
	caFile := flag.String("ca", "", "CA certificate file")
	concurrency := flag.Int("concurrency", 64, "requests in flight")
	flag.Parse()

	pool := x509.NewCertPool()
	if pem, err := os.ReadFile(*caFile); err == nil {
		pool.AppendCertsFromPEM(pem)
	} else {
		fmt.Fprintln(os.Stderr, "loadgen: reading CA:", err)
		os.Exit(2)
	}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: *concurrency,
	}
	client := &http.Client{Transport: transport, Timeout: 120 * time.Second}

	var requests []request
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<26)
	for scanner.Scan() {
		if len(bytes.TrimSpace(scanner.Bytes())) == 0 {
			continue
		}
		var r request
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen: bad input line:", err)
			os.Exit(2)
		}
		requests = append(requests, r)
	}

	work := make(chan request)
	results := make(chan result, 1024)
	var wg sync.WaitGroup
	started := time.Now()
	for i := 0; i < *concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				results <- post(client, *server, *token, r)
			}
		}()
	}
	go func() {
		for _, r := range requests {
			work <- r
		}
		close(work)
		wg.Wait()
		close(results)
	}()

	out := bufio.NewWriter(os.Stdout)
	failed := 0
	for res := range results {
		fmt.Fprintf(out, "%s\t%d\t%d\n", res.key, res.doneAt, res.status)
		if res.status != http.StatusCreated && res.status != http.StatusOK && res.status != http.StatusConflict {
			failed++
			if failed <= 5 {
				fmt.Fprintf(os.Stderr, "loadgen: %s: %d %s\n", res.key, res.status, res.err)
			}
		}
	}
	out.Flush()
	seconds := time.Since(started).Seconds()
	fmt.Fprintf(os.Stderr, "loadgen: %d requests, %d failed, %.2f s, %.0f/s\n",
		len(requests), failed, seconds, float64(len(requests))/seconds)
	if failed > 0 {
		os.Exit(1)
	}
}

func post(client *http.Client, server, token string, r request) result {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequest(http.MethodPost, server+r.Path, bytes.NewReader(r.Body))
		if err != nil {
			return result{key: r.Key, doneAt: time.Now().UnixNano(), err: err.Error()}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			if attempt < 3 {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return result{key: r.Key, doneAt: time.Now().UnixNano(), err: err.Error()}
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done := time.Now().UnixNano()
		// 429 (APF) and 5xx are retried: the caller wants every object to exist.
		if (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500) && attempt < 10 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		msg := ""
		if resp.StatusCode >= 300 {
			msg = string(body)
			if len(msg) > 300 {
				msg = msg[:300]
			}
		}
		return result{key: r.Key, doneAt: done, status: resp.StatusCode, err: msg}
	}
}
