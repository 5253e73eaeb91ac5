// Command kubectl is the real kubectl (k8s.io/kubectl at the control plane's release), built beside
// helm for the tests of the rendered manifests and the Helm chart: `kubectl kustomize` over the
// rendered base, `kubectl apply -f` of `aicr daemonset render` (the GitOps path).
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
