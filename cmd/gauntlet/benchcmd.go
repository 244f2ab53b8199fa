package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gauntlet-dev/gauntlet/cmd/gauntlet/bench"
)

// errRegressed is a comparison that found a regression: printed, exit status 1.
var errRegressed = errors.New("a figure regressed")

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Write the table of benchmark figures, or compare two tables",
	}
	cmd.AddCommand(newBenchTableCmd(), newBenchCompareCmd(), newBenchBugsCmd())
	return cmd
}

func newBenchTableCmd() *cobra.Command {
	var out, commit, note string
	var figures []string
	cmd := &cobra.Command{
		Use:   "table [GO-TEST-BENCH-OUTPUT...]",
		Short: "Write BENCHMARKS.md and benchmarks.json from `go test -bench` output and figure files",
		Long: `table reads the output of 'go test -bench' (Go's benchmark format) and JSON
lists of figures (as the envtest scale benchmark writes with -figures), and
writes one table, figure | value | goal | machine, as BENCHMARKS.md and
benchmarks.json into --out. 'make bench' runs it.`,
		Example: `  gauntlet bench table --out artifacts/bench-20261125-0930 unit.txt sim.txt --figures scale.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("--out is required")
			}
			t := bench.Table{Time: time.Now(), Commit: commit, Note: note, Machine: bench.ThisMachine()}
			for _, path := range args {
				f, err := os.Open(path)
				if err != nil {
					return err
				}
				figs, err := bench.ParseGoTest(f, path)
				_ = f.Close()
				if err != nil {
					return fmt.Errorf("reading Go benchmark output %s: %w", path, err)
				}
				if len(figs) == 0 {
					return fmt.Errorf("%s holds no benchmark result", path)
				}
				t.Figures = append(t.Figures, figs...)
			}
			for _, path := range figures {
				figs, err := bench.ReadFigures(path)
				if err != nil {
					return err
				}
				t.Figures = append(t.Figures, figs...)
			}
			if err := bench.WriteFiles(out, t); err != nil {
				return err
			}
			_, _ = fmt.Fprintf(cmd.OutOrStdout(), "wrote %d figures to %s/%s and %s\n", len(t.Figures), out, bench.MarkdownName, bench.JSONName)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "folder to write BENCHMARKS.md and benchmarks.json into")
	cmd.Flags().StringArrayVar(&figures, "figures", nil, "a JSON list of figures to add (repeatable)")
	cmd.Flags().StringVar(&commit, "commit", "", "the commit measured, shown in the table")
	cmd.Flags().StringVar(&note, "note", "", "a sentence shown above the table (what else ran on the machine, where figures come from)")
	return cmd
}

func newBenchCompareCmd() *cobra.Command {
	var threshold, speedThreshold float64
	cmd := &cobra.Command{
		Use:   "compare A B",
		Short: "Print each benchmark figure of two tables, old → new, with the change; exit 1 on a regression",
		Long: `compare reads two tables that 'make bench' wrote (a run's folder, its
benchmarks.json, or the BENCHMARKS.md beside it) and prints every figure of
either: A, B and the relative change. A change for the worse beyond
--threshold (--speed-threshold for times and rates) is flagged REGRESSION
and makes the exit status 1. Times and rates are judged only between
machines of one CPU model and core count; counts (allocations, writes,
reconciles, memory) on any.`,
		Example: `  gauntlet bench compare docs/BENCHMARKS.md artifacts/bench-20261125-0930`,
		Args:    exactArgs("A", "B"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("speed-threshold") {
				speedThreshold = threshold
			}
			if threshold < 0 || speedThreshold < 0 {
				return usagef("--threshold and --speed-threshold must not be negative, got %v and %v", threshold, speedThreshold)
			}
			th := bench.Thresholds{Count: threshold, Speed: speedThreshold}
			a, err := bench.ReadTable(args[0])
			if err != nil {
				return err
			}
			b, err := bench.ReadTable(args[1])
			if err != nil {
				return err
			}
			n, err := bench.WriteComparison(cmd.OutOrStdout(), a, b, bench.Compare(a, b, th), th)
			if err != nil {
				return err
			}
			if n > 0 {
				return errRegressed
			}
			return nil
		},
	}
	cmd.Flags().Float64Var(&threshold, "threshold", 0.10, "relative change (0.10 = 10%) beyond which a worse figure is a regression")
	cmd.Flags().Float64Var(&speedThreshold, "speed-threshold", 0.10, "the same for times and rates, which move with the machine's load (default: --threshold)")
	return cmd
}
