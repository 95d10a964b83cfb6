package cli

import "github.com/spf13/cobra"

func addCompletions(root *cobra.Command, g *globals) {}
