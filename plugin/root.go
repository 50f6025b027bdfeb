package plugin

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
)

// NewCommand returns the kubectl-flotilla command with its subcommands,
// writing to streams.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:   "kubectl-flotilla",
		Short: "Inspect a flotilla host: its member clusters, and why each pod is where it is",
		// kubectl runs a plugin as `kubectl flotilla ...`.
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl flotilla"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flags.AddFlags(root.PersistentFlags())
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.AddCommand(newClustersCommand(flags, streams), newExplainCommand(flags, streams),
		newAdoptCommand(flags, streams), newReleaseCommand(flags, streams))
	return root
}

// hostClient is the client of the host cluster the flags name.
func hostClient(flags *genericclioptions.ConfigFlags) (kubernetes.Interface, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
