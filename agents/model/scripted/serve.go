package scripted

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

const shutdownGrace = 200 * time.Millisecond

// Serve listens on addr (default "127.0.0.1:0") and serves the script until
// ctx ends. It returns the base URL clients use, e.g.
// "http://127.0.0.1:PORT/v1", and wait, which blocks until the server has
// stopped and returns why it stopped (nil after ctx ended).
func Serve(ctx context.Context, addr string, s *Script, logger *slog.Logger) (url string, wait func() error, err error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("scripted model: listen on %s: %w", addr, err)
	}
	// Request contexts derive from ctx so that a delayed reply stops waiting
	// when the server is stopped, instead of holding up Shutdown.
	srv := &http.Server{
		Handler:           &handler{s: s, log: logger},
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		// Handlers see ctx end too, so in-flight replies finish at once; the
		// short grace is for writes in progress. Waiting longer gains
		// nothing: net/http keeps a connection that never sent a request
		// (a client's spare dial) open for 5s before it counts as idle.
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			srv.Close()
		}
	}()
	url = "http://" + ln.Addr().String() + "/v1"
	logger.Info("scripted model listening", "url", url, "script", s.name, "rules", len(s.rules))
	wait = sync.OnceValue(func() error {
		err := <-done
		// Serve also stops on its own (a listener error); only after a
		// shutdown is there a Shutdown call to wait for.
		if err == nil {
			<-stopped
		}
		return err
	})
	return url, wait, nil
}
