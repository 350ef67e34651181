package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"rig/api"
)

// heartbeatEvery is how long a command waiting on a long daemon request
// stays silent: the daemon answers a request once, at its end.
const heartbeatEvery = 10 * time.Second

// heartbeat prints a line every `every` until stop is called: how long the
// request has run and what the study is doing now, as rig study status reads
// it from the daemon. Nothing is printed for a request that ends sooner.
func heartbeat(ctx context.Context, w io.Writer, socket, study, what string, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		c := api.NewClient(socket)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			line := fmt.Sprintf("[%s] still %s, %s so far", time.Now().Format("15:04:05"), what, time.Since(start).Round(time.Second))
			sctx, scancel := context.WithTimeout(ctx, every/2)
			if info, err := c.Status(sctx, api.NameRequest{Name: study}); err == nil && info.Activity != "" {
				line += ": now " + info.Activity
			}
			scancel()
			if ctx.Err() != nil {
				return
			}
			fmt.Fprintln(w, line)
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// withHeartbeat makes a daemon request through call with a heartbeat on w,
// then writes the daemon's text after the last heartbeat line.
func withHeartbeat(ctx context.Context, w io.Writer, socket, study, what string, call func(text io.Writer) error) error {
	var text bytes.Buffer
	stop := heartbeat(ctx, w, socket, study, what, heartbeatEvery)
	err := call(&text)
	stop()
	w.Write(text.Bytes())
	return err
}
