package api

import (
	"os"
	"path/filepath"
)

// DefaultHome is where a daemon keeps its studies unless told otherwise:
// $RIG_HOME, else ~/.local/share/rig. Its socket is SocketIn(home).
func DefaultHome() string {
	if h := os.Getenv("RIG_HOME"); h != "" {
		return h
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "rig-home")
	}
	return filepath.Join(home, ".local", "share", "rig")
}

// SocketIn is the socket a daemon with that home serves on by default.
func SocketIn(home string) string { return filepath.Join(home, "rig.sock") }
