package metrics

import (
	"context"
	"net/http"
)

// HealthHandler answers /healthz from ready: 200 "ok" while it is nil (a
// worker polling for trials), 503 with its error otherwise (every check
// the worker fails, so a probe or a person reads why it takes no trials).
func HealthHandler(ready func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := ready(r.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(err.Error() + "\n"))
			return
		}
		_, _ = w.Write([]byte("ok: polling for trials\n"))
	})
}
