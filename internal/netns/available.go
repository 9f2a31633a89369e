package netns

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Capabilities this package needs: CAP_NET_ADMIN to make devices and
// addresses, CAP_SYS_ADMIN for setns(2) and the bind mounts of `ip netns`.
const (
	capNetAdmin = 12
	capSysAdmin = 21
)

// Available reports whether this process can create namespaces and TAP
// devices: nil when it has CAP_NET_ADMIN and CAP_SYS_ADMIN (as root normally
// does), /dev/net/tun opens, and `ip` is on PATH. Otherwise the error lists
// everything that is missing.
func Available() error {
	var missing []string
	if err := checkCaps(); err != nil {
		missing = append(missing, err.Error())
	}
	if f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0); err != nil {
		missing = append(missing, fmt.Sprintf("cannot open /dev/net/tun: %v", err))
	} else {
		f.Close()
	}
	if _, err := exec.LookPath("ip"); err != nil {
		missing = append(missing, "the ip command (iproute2) is not on PATH")
	}
	if len(missing) > 0 {
		return errors.New("netns: unavailable: " + strings.Join(missing, "; "))
	}
	return nil
}

// checkCaps reads the effective capability set of this process. Root in a
// container may lack capabilities, so the set is checked even for euid 0.
func checkCaps() error {
	eff, err := effectiveCaps()
	if err != nil {
		if os.Geteuid() == 0 {
			return nil // trust root when the set cannot be read
		}
		return fmt.Errorf("not root (euid %d) and cannot read capabilities: %v", os.Geteuid(), err)
	}
	var lack []string
	if eff&(1<<capNetAdmin) == 0 {
		lack = append(lack, "CAP_NET_ADMIN")
	}
	if eff&(1<<capSysAdmin) == 0 {
		lack = append(lack, "CAP_SYS_ADMIN")
	}
	if len(lack) > 0 {
		return fmt.Errorf("euid %d lacks %s (run as root)", os.Geteuid(), strings.Join(lack, " and "))
	}
	return nil
}

func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	if err := s.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no CapEff line in /proc/self/status")
}
