// The scram-user mode of bench-client: creates (or replaces) a SCRAM user through
// AlterUserScramCredentials, as `kafka-configs --entity-type users --alter --add-config
// 'SCRAM-SHA-512=[password=...]'` does, so the benchmark's SASL_SSL runs can log in.

package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func runScramUser(args []string) (map[string]any, error) {
	fs := flag.NewFlagSet("scram-user", flag.ExitOnError)
	var c common
	c.register(fs)
	user := fs.String("user", "bench", "the user to create")
	password := fs.String("password", "bench-secret", "its password")
	mechanism := fs.String("mechanism", "SCRAM-SHA-512", "SCRAM-SHA-256 or SCRAM-SHA-512")
	parse(fs, args)
	mech := kadm.ScramSha512
	if *mechanism == "SCRAM-SHA-256" {
		mech = kadm.ScramSha256
	} else if *mechanism != "SCRAM-SHA-512" {
		return nil, fmt.Errorf("-mechanism %q: SCRAM-SHA-256 or SCRAM-SHA-512", *mechanism)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	cl, err := kgo.NewClient(c.opts()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	upsert := kadm.UpsertSCRAM{User: *user, Mechanism: mech, Iterations: 4096, Password: *password}
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{upsert})
	if err != nil {
		return nil, err
	}
	for _, r := range res {
		if r.Err != nil {
			return nil, fmt.Errorf("user %s: %v", r.User, r.Err)
		}
	}
	return map[string]any{"user": *user, "mechanism": *mechanism}, nil
}
