package internal

import (
	_ "github.com/NVIDIA/go-nvml/pkg/nvml"
	_ "github.com/containerd/cgroups/v3/cgroup2"
	_ "github.com/ollama/ollama/api"
	_ "github.com/shirou/gopsutil/v4/mem"
	_ "github.com/spf13/cobra"
	_ "github.com/vishvananda/netlink"
	_ "go.etcd.io/bbolt"
	_ "golang.org/x/sys/unix"
	_ "gonum.org/v1/gonum/stat"
	_ "gonum.org/v1/plot"
	_ "gopkg.in/yaml.v3"
)
