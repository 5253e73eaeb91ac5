// Command fakesmi is the real-kubelet lane's stand-in for the NVIDIA driver's nvidia-smi: the
// lane's GPU node injects it into containers as /usr/bin/nvidia-smi, as the NVIDIA container
// runtime injects the real one. It is static (the aicr image has no shell), and prints the
// nvidia-smi-q-x.xml file beside its own path for `-q -x`, like the kubelet stand-in's script.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

const xmlName = "nvidia-smi-q-x.xml"

func main() {
	q, x, l := false, false, false
	for _, a := range os.Args[1:] {
		switch a {
		case "-q", "--query":
			q = true
		case "-x", "--xml-format":
			x = true
		case "-qx", "-xq":
			q, x = true, true
		case "-L", "--list-gpus":
			l = true
		}
	}
	xml, err := os.ReadFile(filepath.Join(filepath.Dir(os.Args[0]), xmlName))
	if err != nil {
		if self, e := os.Executable(); e == nil {
			xml, err = os.ReadFile(filepath.Join(filepath.Dir(self), xmlName))
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver:", err)
		os.Exit(9)
	}
	if q && x {
		os.Stdout.Write(xml)
		return
	}
	field := func(tag string) string {
		m := regexp.MustCompile("<" + tag + ">([^<]*)</" + tag + ">").FindSubmatch(xml)
		if m == nil {
			return ""
		}
		return strings.TrimSpace(string(m[1]))
	}
	count := strings.Count(string(xml), "<gpu id=")
	if l {
		for i := 0; i < count; i++ {
			fmt.Printf("GPU %d: %s (UUID: GPU-00000000-0000-0000-0000-00000000000%d)\n", i, field("product_name"), i)
		}
		return
	}
	fmt.Printf("NVIDIA-SMI %s  Driver Version: %s  (aicr real-kubelet lane fake: %dx %s)\n",
		field("driver_version"), field("driver_version"), count, field("product_name"))
}
