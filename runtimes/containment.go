package runtimes

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrNotContained means the sandbox's network namespace holds something other
// than loopback. The arm is refused; nothing is started.
var ErrNotContained = errors.New("sandbox is not loopback-only")

// Containment is the evidence the sandbox collects before a runtime starts: what
// the namespace's interfaces and routes were, read through netlink. No probe
// traffic is ever sent; the check only reads.
type Containment struct {
	Sandboxed      bool     `json:"sandboxed"`
	NetNS          string   `json:"netns"`        // e.g. net:[4026532281]
	ParentNetNS    string   `json:"parent_netns"` // the namespace rig itself is in
	UserNamespace  bool     `json:"user_namespace"`
	Interfaces     []string `json:"interfaces"` // "lo up 127.0.0.1/8 ::1/128"
	Routes         []string `json:"routes"`     // "local 127.0.0.1 dev lo table 255"
	LoopbackOnly   bool     `json:"loopback_only"`
	Violations     []string `json:"violations,omitempty"`
	CgroupJoined   string   `json:"cgroup,omitempty"`
	EnvironmentSet []string `json:"environment"` // names only, never values
	// Confinement is the rest of the containment, read back inside the
	// contained process: identity, writable paths, process namespace, limits.
	Confinement *Confinement `json:"confinement,omitempty"`
}

// readContainment lists every link, address and route of the current network
// namespace and judges whether only loopback is there.
func readContainment() (Containment, error) {
	c := Containment{Sandboxed: true, LoopbackOnly: true}
	c.NetNS, _ = os.Readlink("/proc/self/ns/net")
	links, err := netlink.LinkList()
	if err != nil {
		return c, fmt.Errorf("listing interfaces through netlink: %w", err)
	}
	loIndex := -1
	for _, l := range links {
		a := l.Attrs()
		state := "down"
		if a.Flags&net.FlagUp != 0 {
			state = "up"
		}
		desc := []string{a.Name, state}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return c, fmt.Errorf("listing addresses of %s: %w", a.Name, err)
		}
		for _, ad := range addrs {
			desc = append(desc, ad.IPNet.String())
			if !ad.IP.IsLoopback() {
				c.Violations = append(c.Violations, fmt.Sprintf("address %s on %s is not loopback", ad.IPNet, a.Name))
			}
		}
		c.Interfaces = append(c.Interfaces, strings.Join(desc, " "))
		if a.Flags&net.FlagLoopback != 0 && a.Name == "lo" {
			loIndex = a.Index
			continue
		}
		c.Violations = append(c.Violations, fmt.Sprintf("interface %s (%s) is not loopback", a.Name, l.Type()))
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return c, fmt.Errorf("listing routes through netlink: %w", err)
	}
	for _, r := range routes {
		dst := "default"
		if r.Dst != nil {
			dst = r.Dst.String()
		}
		c.Routes = append(c.Routes, fmt.Sprintf("%s dev-index %d table %d", dst, r.LinkIndex, r.Table))
		if r.LinkIndex != loIndex {
			c.Violations = append(c.Violations, fmt.Sprintf("route to %s leaves through interface index %d, not lo", dst, r.LinkIndex))
		}
		if r.Dst != nil && !r.Dst.IP.IsLoopback() {
			c.Violations = append(c.Violations, fmt.Sprintf("route to %s is not a loopback destination", dst))
		}
		if r.Dst == nil {
			c.Violations = append(c.Violations, "a default route exists")
		}
	}
	if loIndex < 0 {
		c.Violations = append(c.Violations, "no loopback interface")
	}
	c.LoopbackOnly = len(c.Violations) == 0
	return c, nil
}

// bringLoopbackUp sets lo up in a fresh namespace, where it starts down.
func bringLoopbackUp() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("setting lo up: %w", err)
	}
	return nil
}

// ReadHostContainment reads the interfaces and routes of the namespace the
// caller runs in. Tests use it to show the difference between the host and a
// sandbox without sending anything anywhere.
func ReadHostContainment() (Containment, error) {
	c, err := readContainment()
	c.Sandboxed = false
	return c, err
}

// addDummyInterface adds a veth pair whose both ends stay inside the sandbox:
// the shape of a leak (a second interface) that the containment check must
// refuse, while nothing is connected to the outside.
func addDummyInterface() error {
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "rigleak0"}, PeerName: "rigleak1"}
	if err := netlink.LinkAdd(v); err != nil {
		return fmt.Errorf("adding the self-test interface: %w", err)
	}
	return nil
}
