// Package deploy holds the files a site uses to launch rig workers (systemd
// units, a Slurm batch script, a Kubernetes manifest) and the tests that run
// each of them the way its launcher would, with the real rig binary. It has
// no code a program imports; the files are what a site copies.
package deploy
