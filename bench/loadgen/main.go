// loadgen POSTs JSON objects to a kube-apiserver as fast as it accepts them: the bench's bulk
// creator (nodes, pods, PodGroups "created at once") and its bare binder (the ceiling: pending
// pods bound through pods/binding with no scheduling at all). Standard library only.
//
//	loadgen -server URL -token T -ca FILE [-concurrency 64] [-rate R] < requests.jsonl > done.tsv
//
// Each input line is {"key": "...", "path": "/api/v1/...", "body": {...}}; requests start in
// input order on -concurrency workers sharing one HTTP/2 connection (like client-go). Each
// output line is "key<TAB>unix-nanoseconds when the answer arrived<TAB>HTTP status". A summary
// (count, errors, seconds, requests/s) goes to stderr; the exit status is 1 if any request
// failed with a status other than 409 AlreadyExists. With -rate, request i starts no earlier
// than i/R seconds after the first (a paced stream: what the scheduler adds to a gang's latency
// without the API server's queue in it); otherwise as fast as the workers take them.
//
//	loadgen -server URL -token T -ca FILE -list /api/v1/pods,/api/v1/nodes [-limit 500]
//
// lists each path to its end (pages of -limit, each page's items split but not decoded),
// all paths at once, without response compression (as kube-scheduler's client): the time a
// bare client needs to list what a scheduler must have before its first decision, the floor
// of workload (d)'s restart. Output: "path<TAB>objects<TAB>bytes<TAB>seconds" per path and
// "total<TAB>objects<TAB>bytes<TAB>seconds" (from exec to the last page of any path).
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
	"net/url"
	"os"
	"strings"
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
	list := flag.String("list", "", "comma-separated paths to list (the list floor) instead of POSTing")
	limit := flag.Int("limit", 500, "page size of -list")
	rate := flag.Float64("rate", 0, "requests started per second (0: as fast as accepted)")
	flag.Parse()
	started := time.Now()

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
		DisableCompression:  *list != "",
	}
	client := &http.Client{Transport: transport, Timeout: 120 * time.Second}
	if *list != "" {
		os.Exit(listAll(client, *server, *token, strings.Split(*list, ","), *limit, started))
	}

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
		first := time.Now()
		for i, r := range requests {
			if *rate > 0 {
				time.Sleep(time.Until(first.Add(time.Duration(float64(i) / *rate * float64(time.Second)))))
			}
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

type listed struct {
	path    string
	objects int
	bytes   int64
	seconds float64
	err     error
}

// listAll lists every path concurrently (each path's pages one after another, as a
// continue token needs the previous page) and prints what each took.
func listAll(client *http.Client, server, token string, paths []string, limit int, started time.Time) int {
	results := make([]listed, len(paths))
	var wg sync.WaitGroup
	for i, path := range paths {
		wg.Add(1)
		go func(i int, path string) {
			defer wg.Done()
			results[i] = listOne(client, server, token, path, limit, started)
		}(i, path)
	}
	wg.Wait()
	total := listed{path: "total"}
	status := 0
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(os.Stderr, "loadgen: listing %s: %v\n", r.path, r.err)
			status = 1
		}
		fmt.Printf("%s\t%d\t%d\t%.3f\n", r.path, r.objects, r.bytes, r.seconds)
		total.objects += r.objects
		total.bytes += r.bytes
		if r.seconds > total.seconds {
			total.seconds = r.seconds
		}
	}
	fmt.Printf("%s\t%d\t%d\t%.3f\n", total.path, total.objects, total.bytes, total.seconds)
	return status
}

func listOne(client *http.Client, server, token, path string, limit int, started time.Time) listed {
	out := listed{path: path}
	cont := ""
	for {
		query := url.Values{"limit": {fmt.Sprint(limit)}}
		if cont != "" {
			query.Set("continue", cont)
		}
		req, err := http.NewRequest(http.MethodGet, server+path+"?"+query.Encode(), nil)
		if err != nil {
			out.err = err
			return out
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			out.err = err
			return out
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			out.err = fmt.Errorf("status %d: %v %.200s", resp.StatusCode, err, body)
			return out
		}
		var page struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			out.err = err
			return out
		}
		out.objects += len(page.Items)
		out.bytes += int64(len(body))
		cont = page.Metadata.Continue
		if cont == "" {
			out.seconds = time.Since(started).Seconds()
			return out
		}
	}
}
