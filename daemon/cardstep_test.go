package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestStepWaitsForTheTryOnTheCard: an engine execution's step after its
// trials waits while a try holds the card (saying so), gives up when its
// context ends, and takes the card once the try has ended.
func TestStepWaitsForTheTryOnTheCard(t *testing.T) {
	svc, err := NewService(t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	svc.tryMu.Lock() // a try is running
	var said []string
	say := func(s string) { said = append(said, s) }
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if err := svc.cardForStep(ctx, say); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("with a try on the card: %v, want it to wait until its context ends", err)
	}
	if len(said) == 0 || !strings.Contains(said[0], "waiting for the try") {
		t.Errorf("the wait was not shown: %q", said)
	}
	go func() { time.Sleep(300 * time.Millisecond); svc.tryMu.Unlock() }()
	if err := svc.cardForStep(context.Background(), say); err != nil {
		t.Errorf("after the try ended: %v", err)
	}
}
