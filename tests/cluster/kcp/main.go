// Command kcp is a multi-call binary holding the real Kubernetes control plane
// components used by aicr's test cluster: one link instead of three.
//
//	kcp apiserver [flags]           k8s.io/kubernetes/cmd/kube-apiserver
//	kcp controller-manager [flags]  k8s.io/kubernetes/cmd/kube-controller-manager
//	kcp scheduler [flags]           k8s.io/kubernetes/cmd/kube-scheduler
//	kcp kubelet [flags]             k8s.io/kubernetes/cmd/kubelet (the real-kubelet lane's nodes)
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kcp apiserver|controller-manager|scheduler|kubelet [flags]")
		os.Exit(2)
	}
	var cmd *cobra.Command
	switch os.Args[1] {
	case "apiserver", "kube-apiserver":
		cmd = apiserver.NewAPIServerCommand()
	case "controller-manager", "kube-controller-manager":
		cmd = controllermanager.NewControllerManagerCommand()
	case "scheduler", "kube-scheduler":
		cmd = scheduler.NewSchedulerCommand()
	case "kubelet":
		cmd = kubelet.NewKubeletCommand(context.Background())
	default:
		fmt.Fprintf(os.Stderr, "kcp: unknown component %q\n", os.Args[1])
		os.Exit(2)
	}
	cmd.SetArgs(os.Args[2:])
	os.Exit(cli.Run(cmd))
}
