package sidecar

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Main serves mw as a program: flags --listen (host:port or unix:///path), --token-env
// (the variable holding the bearer token to require), --fail-open and --grace; prints
// "listening on ADDR"; drains on SIGTERM or SIGINT.
func Main(mw Middleware) {
	listen := flag.String("listen", "127.0.0.1:7001", "host:port or unix:///path")
	tokenEnv := flag.String("token-env", "", "require the bearer token held in this variable")
	failOpen := flag.Bool("fail-open", false, "prefer fail_open")
	grace := flag.Duration("grace", 10*time.Second, "longest drain on SIGTERM")
	flag.Parse()
	cfg := Config{Listen: *listen, FailOpen: *failOpen, Grace: *grace,
		Ready: func(addr string) { fmt.Println("listening on", addr) }}
	if *tokenEnv != "" {
		if cfg.Token = os.Getenv(*tokenEnv); cfg.Token == "" {
			fmt.Fprintf(os.Stderr, "error: environment variable %s is empty or unset\n", *tokenEnv)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := Serve(ctx, mw, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
