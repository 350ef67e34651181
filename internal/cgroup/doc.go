// Package cgroup is rig's one reader and writer of Linux control groups: it
// finds rig's own groups, creates the groups that hold a runtime's process
// tree (a memory Reservation sized to a simulated card, a PidsGroup capping
// its tasks), reads their counters and removes them. It works on the unified
// hierarchy (v2) first and on v1 where the host has only v1. It does not
// decide limits (preflight sizes cards, runtimes sets a tree's caps) and does
// not act on readings (the governor does).
//
// Reads go through plain files, not a cgroup library, so the same code runs on
// a copy of the layout in a test directory. The files used, by version:
//
//	what               v2 (unified)                     v1
//	current memory     memory.current                   memory.usage_in_bytes
//	peak memory        memory.peak (Linux 5.19+)        memory.max_usage_in_bytes
//	reset the peak     write to memory.peak, per open   write 0 to memory.max_usage_in_bytes
//	                   file (Linux 6.12+)
//	memory limit       memory.max, memory.swap.max      memory.limit_in_bytes, memory.memsw.limit_in_bytes
//	OOM record         memory.events (oom, oom_kill,    memory.oom_control (under_oom, oom_kill),
//	                   high)                            memory.failcnt
//	task cap           pids.max, pids.events (max)      pids.max, pids.events (max), in the pids hierarchy
//	members            cgroup.procs                     cgroup.procs
//	kill all           cgroup.kill (Linux 5.14+)        SIGKILL to each pid in cgroup.procs
//	CPUs allowed       cpuset.cpus.effective            cpuset.effective_cpus
//	own group          /proc/self/cgroup "0::" line     /proc/self/cgroup controller lines and
//	                                                    /proc/self/mountinfo
//
// "max" is handled in one place (parseLimit): a limit file that holds "max"
// (v2), or v1's "no limit" value (the largest page count, about 2^63 bytes),
// reads as Unlimited. Counters (current, peak, events) never hold "max"; a
// counter that does, is empty, or is not a number is an error naming the file.
package cgroup
