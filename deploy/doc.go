// Package deploy holds the files a site uses to launch rig workers (systemd
// units, a Slurm batch script, a Kubernetes manifest) and to alert on them
// (example Prometheus rules), and the tests that run each of them the way
// its launcher would, with the real rig binary, or through the real
// checker (systemd-analyze, kubernetes-validate, promtool). It has no code
// a program imports; the files are what a site copies (docs/deploy.md).
package deploy
