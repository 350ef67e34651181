package daemon

import (
	"bytes"
	"io"
	"strings"
	"sync"
)

// activities is what a long request of each study is doing now (a
// validation run, a replayed record), for `rig study status` to show while
// that request has not answered yet: the daemon answers a request once, at
// its end.
type activities struct {
	mu  sync.Mutex
	now map[string]string // study → what it is doing
}

func (a *activities) set(study, what string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.now == nil {
		a.now = map[string]string{}
	}
	if what == "" {
		delete(a.now, study)
	} else {
		a.now[study] = what
	}
}

func (a *activities) get(study string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.now[study]
}

// activityWriter passes a request's text on and keeps its last complete line
// as the study's activity: each step of a validation says what it starts.
type activityWriter struct {
	w     io.Writer
	a     *activities
	study string
	part  []byte
}

func (aw *activityWriter) Write(p []byte) (int, error) {
	aw.part = append(aw.part, p...)
	if i := bytes.LastIndexByte(aw.part, '\n'); i >= 0 {
		lines := strings.Split(strings.TrimSpace(string(aw.part[:i])), "\n")
		aw.a.set(aw.study, strings.Join(strings.Fields(lines[len(lines)-1]), " "))
		aw.part = append(aw.part[:0], aw.part[i+1:]...)
	}
	return aw.w.Write(p)
}
