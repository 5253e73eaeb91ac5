// Command notaicr is the test world's stand-in for NVIDIA's Go aicr v0.11.1, the program a
// cluster runs when an aicr Job or DaemonSet names NVIDIA's image: what aicr must recognise and
// refuse. It behaves as upstream's binary does for what aicr's manifests ask of it (observed from
// upstream's source and its binary, built offline):
//
//   - `[--debug] [--log-json] snapshot -o cm://NS/NAME [--format json]` (upstream's own agent
//     pod, AICR_AGENT_MODE=true): writes its own snapshot document (apiVersion
//     aicr.nvidia.com/v1alpha1, metadata.version v0.11.1) into that ConfigMap through the
//     in-cluster API (the pod's ServiceAccount token), as `snapshot.yaml` or `snapshot.json`
//     with `format`, and exits 0; it writes no termination message.
//   - any other verb with a flag: aicr's agent Job (`agent -o cm://...`) and DaemonSet
//     (`daemon --port ...`): urfave/cli's "Incorrect Usage: flag provided but not defined: -o"
//     (or -port) and upstream's `ERROR command failed ... exitCode=1` line on stderr, exit 1;
//     a bare verb prints "No help topic for 'daemon'" and exits 3.
//   - `--version`: `aicr version v0.11.1 (commit: ..., date: ...)`.
//
// Standard library only: it builds in seconds and runs in a scratch image (real-kubelet lane).
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

const (
	version = "v0.11.1"
	commit  = "5c8e0a1"
	saDir   = "/var/run/secrets/kubernetes.io/serviceaccount"
)

func main() {
	args := os.Args[1:]
	for len(args) > 0 && (args[0] == "--debug" || args[0] == "--log-json") {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Println("NAME:\n   aicr - AICR CLI")
		return
	}
	switch args[0] {
	case "--version", "-v":
		fmt.Printf("aicr version %s (commit: %s, date: 2026-01-20T00:00:00Z)\n", version, commit)
	case "snapshot":
		os.Exit(snapshot(args[1:]))
	default:
		if len(args) == 1 {
			fmt.Fprintf(os.Stderr, "No help topic for '%s'\n", args[0])
			os.Exit(3)
		}
		flag := strings.TrimLeft(strings.SplitN(args[1], "=", 2)[0], "-")
		fmt.Println("NAME:\n   aicr - AICR CLI\n\nUSAGE:\n   aicr [global options] [command [command options]]")
		fmt.Fprintf(os.Stderr, "Incorrect Usage: flag provided but not defined: -%s\n\n", flag)
		fmt.Fprintf(os.Stderr, "%s ERROR command failed error=\"flag provided but not defined: -%s\" exitCode=1\n",
			time.Now().Format("2006/01/02 15:04:05"), flag)
		os.Exit(1)
	}
}

func snapshot(args []string) int {
	output, format := "", "yaml"
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-o", "--output":
			if i+1 < len(args) {
				output = args[i+1]
				i++
			}
		case "--format", "-t":
			if i+1 < len(args) {
				format = args[i+1]
				i++
			}
		}
	}
	node := os.Getenv("NODE_NAME")
	stamp := time.Now().UTC().Format(time.RFC3339)
	doc := fmt.Sprintf("kind: Snapshot\napiVersion: aicr.nvidia.com/v1alpha1\nmetadata:\n  source-node: %s\n  timestamp: \"%s\"\n  version: %s\nmeasurements: []\n", node, stamp, version)
	if format == "json" {
		b, _ := json.Marshal(map[string]any{
			"kind": "Snapshot", "apiVersion": "aicr.nvidia.com/v1alpha1",
			"metadata":     map[string]string{"source-node": node, "timestamp": stamp, "version": version},
			"measurements": []any{},
		})
		doc = string(b)
	}
	if !strings.HasPrefix(output, "cm://") {
		fmt.Print(doc)
		return 0
	}
	ref := strings.SplitN(strings.TrimPrefix(output, "cm://"), "/", 2)
	if len(ref) != 2 {
		fail(fmt.Errorf("invalid ConfigMap URI %q", output))
		return 8
	}
	if err := writeConfigMap(ref[0], ref[1], format, doc, stamp); err != nil {
		fail(err)
		return 8
	}
	fmt.Fprintf(os.Stderr, "[cli] snapshot saved to ConfigMap: uri=%s\n", output)
	return 0
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "[cli] command failed: error=[INTERNAL] %v exitCode=8\n", err)
}

func writeConfigMap(ns, name, format, doc, stamp string) error {
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	base := fmt.Sprintf("https://%s:%s/api/v1/namespaces/%s/configmaps",
		os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"), ns)
	call := func(method, url string, body any) (int, []byte, error) {
		var reader io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			reader = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, url, reader)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode, out, nil
	}
	data := map[string]string{"snapshot." + format: doc, "format": format, "timestamp": stamp}
	// Upstream's writer: get, then update the existing ConfigMap, or create it.
	status, body, err := call("GET", base+"/"+name, nil)
	if err != nil {
		return err
	}
	if status == http.StatusOK {
		var cm map[string]any
		if err := json.Unmarshal(body, &cm); err != nil {
			return err
		}
		cm["data"] = data
		status, body, err = call("PUT", base+"/"+name, cm)
	} else {
		status, body, err = call("POST", base, map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"data":     data,
		})
	}
	if err != nil {
		return err
	}
	if status >= 300 {
		return fmt.Errorf("failed to write ConfigMap %s/%s: HTTP %d: %s", ns, name, status, strings.TrimSpace(string(body)))
	}
	return nil
}
