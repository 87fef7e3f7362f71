package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/stockflow/stockflow/pkg/natsx"
	"github.com/stockflow/stockflow/tools/launcher"
)

const streamsUsage = `usage: stockflow streams check|apply [-replicas N]
  check  compare every stream with this build's configuration; exit 1 on any difference
  apply  create the missing streams and change the others to this build's configuration
Services and up only create missing streams and report the others; apply is the one way an
existing stream changes. It needs the NATS admin: NATS_URL (with the admin's credentials), or
the running stockflow up's server. -replicas defaults to NATS_STREAM_REPLICAS, else 1.`

// streams checks or applies the stream configuration as the NATS admin.
func streams(ctx context.Context, o launcher.Options, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "check" && args[0] != "apply") {
		fmt.Fprintln(stderr, streamsUsage)
		return flag.ErrHelp
	}
	fs := flag.NewFlagSet("streams "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	replicas := fs.Int("replicas", 1, "stream replicas (1 on a single server, 3 on a three-node cluster)")
	if v := getenv("NATS_STREAM_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("NATS_STREAM_REPLICAS=%q: %w", v, err)
		}
		*replicas = n
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *replicas < 1 || *replicas > 5 {
		return errors.New("-replicas must be between 1 and 5")
	}
	url, err := launcher.NATSAdminURL(o)
	if err != nil {
		return err
	}
	nc, js, err := natsx.Connect(ctx, url, "stockflow-streams")
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	drifts, checkErr := natsx.CheckStreams(ctx, js, *replicas)
	if checkErr != nil && !errors.Is(checkErr, natsx.ErrStreamsNotReady) {
		return checkErr
	}
	if checkErr != nil {
		fmt.Fprintln(stdout, checkErr)
	}
	for _, d := range drifts {
		fmt.Fprintln(stdout, d)
	}
	different := checkErr != nil || len(drifts) > 0
	if args[0] == "check" {
		if different {
			return errors.New("the streams differ from this build's configuration (stockflow streams apply changes them)")
		}
		fmt.Fprintf(stdout, "every stream has this build's configuration (%d replicas)\n", *replicas)
		return nil
	}
	if !different {
		fmt.Fprintf(stdout, "nothing to change: every stream has this build's configuration (%d replicas)\n", *replicas)
		return nil
	}
	if err := natsx.ApplyStreams(ctx, js, *replicas); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "applied: every stream has this build's configuration (%d replicas)\n", *replicas)
	return nil
}
