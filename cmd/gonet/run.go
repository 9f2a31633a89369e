package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"

	"github.com/gonetstack/gonet/gateway"
)

// gonet run: a command in a network namespace of its own, networked by the
// gateway, as `slirp4netns` under `unshare -n` or `podman run` arrange it.
//
// Go cannot fork without exec, so the namespace's first process is gonet
// itself, started again with the namespaces to make (clone flags) and told
// by runChildEnv to wait: the parent makes the TAP device inside the new
// namespace (/proc/CHILD/ns/net), configures it and starts the gateway,
// then writes a byte on a pipe; the child bind-mounts a resolv.conf naming
// the gateway's DNS forwarder over /etc/resolv.conf in its private mount
// namespace and execs the command. When the command exits, so does gonet,
// with its status.
//
// As root the namespaces are made directly. As anyone else gonet first
// starts itself again in a user namespace of its own, where it is root,
// mapped to the caller, and can make network namespaces and TAP devices
// there; its sockets stay in the host's network namespace, the caller's.

var runCommand = &command{
	name:    "run",
	summary: "run a command in a network namespace of its own, networked by the gateway",
	usage:   "gonet run [-tap NAME] [gateway flags] -- CMD [ARG...]",
	about: `Runs CMD in a new network namespace (and a new user namespace when not
root, where CMD runs as root mapped to you), whose only link besides its loopback
(up) is the TAP device of a gateway as gonet gateway -configure makes it: CMD's network is
10.0.2.100/24 with a default route via 10.0.2.2, and /etc/resolv.conf, seen
from CMD alone, names the DNS forwarder 10.0.2.3. gonet exits with CMD's
exit status (128+N when a signal N killed it). It takes gonet gateway's
flags but -netns and -configure; its log, on the stderr CMD writes to too,
is at -log-level warn unless told otherwise.`,
	flags: func() *flag.FlagSet { fs, _ := gatewayFlags("run"); return fs },
	run:   runRun,
}

// Environment variables by which gonet tells its own re-executions what
// they are.
const (
	// runChildEnv marks the namespace's first process; its value is the
	// resolv.conf to bind-mount, or empty for none.
	runChildEnv = "GONET_RUN_CHILD"
	// runUserNSEnv marks a gonet run restarted in its user namespace.
	runUserNSEnv = "GONET_RUN_USERNS"
)

// exitNotFound is the shell's exit status for a command that is not there.
const exitNotFound = 127

// parseRun parses gonet run's arguments: the gateway's flags, "--", and
// the command.
func parseRun(args []string) (*gatewayConfig, []string, error) {
	fs, c := gatewayFlags("run")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return nil, nil, usagef("no command: give it after --, as in gonet run -- curl http://example.org/")
	}
	if i := len(args) - len(rest); i == 0 || args[i-1] != "--" {
		return nil, nil, usagef("unexpected argument %q: put the command after --", rest[0])
	}
	if err := c.check(); err != nil {
		return nil, nil, err
	}
	return c, rest, nil
}

func runRun(ctx context.Context, cmd *command, out *output, args []string) int {
	c, argv, err := parseRun(args)
	if err != nil {
		return reportParseError(out, cmd, err)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet run: %v\n", err)
		return exitNotFound
	}
	if os.Geteuid() != 0 && os.Getenv(runUserNSEnv) == "" {
		return rerunInUserNS(ctx, out)
	}
	n, err := gateway.NewNetwork(c.subnet)
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet run: %v\n", err)
		return exitFail
	}
	resolv, err := os.CreateTemp("", "gonet-run-resolv-*.conf")
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet run: %v\n", err)
		return exitFail
	}
	defer os.Remove(resolv.Name())
	_, err = fmt.Fprintf(resolv, "# gonet run: the gateway's DNS forwarder\nnameserver %v\n", n.DNS)
	if cerr := resolv.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet run: writing resolv.conf: %v\n", err)
		return exitFail
	}

	ready, goAhead, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet run: %v\n", err)
		return exitFail
	}
	defer goAhead.Close()
	child := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       append([]string{"gonet", path}, argv...),
		Env:        append(os.Environ(), runChildEnv+"="+resolv.Name()),
		Stdin:      os.Stdin,
		Stdout:     out.stdout,
		Stderr:     out.stderr,
		ExtraFiles: []*os.File{ready}, // fd 3
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS,
			// The command's network ends with this process: it
			// does not outlive it.
			Pdeathsig: syscall.SIGKILL,
		},
	}
	waited, err := startLocked(child)
	ready.Close()
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet run: starting the command's namespace: %v\n", err)
		return exitFail
	}

	// As a container's runtime does: the namespace's loopback is up,
	// for the servers a command starts for itself.
	c.configure, c.loopback = true, true
	nsPath := "/proc/" + strconv.Itoa(child.Process.Pid) + "/ns/net"
	// The gateway's log shares stderr with the command's output: by
	// default (-log-level warn) only what went wrong is logged.
	log := c.log.logger(out.stderr)
	d, err := startGateway(ctx, log, c, nsPath)
	if err != nil {
		child.Process.Kill()
		<-waited
		log.Error("starting the gateway", "nic", c.link.tap, "err", err)
		return exitFail
	}
	goAhead.Write([]byte{1})
	goAhead.Close()

	select {
	case err = <-waited:
	case <-ctx.Done():
		// SIGINT from a terminal reached the command too; SIGTERM
		// was for gonet alone: pass it on.
		child.Process.Signal(syscall.SIGTERM)
		err = <-waited
	}
	code := exitStatus(err)
	if serr := d.stop(); serr != nil {
		logErrors(log, "shutting down", serr)
	}
	return code
}

// exitStatus returns the exit status a shell would give for a command that
// ended with err, as exec.Cmd.Wait returns it.
func exitStatus(err error) int {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if err != nil {
			return exitFail
		}
		return exitOK
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

// rerunInUserNS runs this gonet run again in a new user namespace where it
// is root, mapped to the caller's user and group, and returns its status.
func rerunInUserNS(ctx context.Context, out *output) int {
	cmd := &exec.Cmd{
		Path:   "/proc/self/exe",
		Args:   os.Args,
		Env:    append(os.Environ(), runUserNSEnv+"=1"),
		Stdin:  os.Stdin,
		Stdout: out.stdout,
		Stderr: out.stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
			Pdeathsig:   syscall.SIGKILL,
		},
	}
	waited, err := startLocked(cmd)
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet run: making a user namespace (are unprivileged user namespaces allowed?): %v\n", err)
		return exitFail
	}
	stop := context.AfterFunc(ctx, func() { cmd.Process.Signal(syscall.SIGTERM) })
	defer stop()
	return exitStatus(<-waited)
}

// startLocked starts cmd and returns the channel its Wait's result comes
// on. The kernel sends Pdeathsig when the thread that forked the child
// ends, not the process; Go ends threads (those of goroutines that locked
// one and returned, as openGuestTAP's), so cmd is started and waited for on
// a thread locked until it has exited.
func startLocked(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	waited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return waited, nil
}

// runChild is the namespace's first process: it waits for the parent's go
// ahead on descriptor 3, puts the gateway's resolv.conf in place, and
// execs the command, os.Args[1] with the arguments os.Args[2:]. It returns
// only on failure, with the exit status.
func runChild() int {
	resolv := os.Getenv(runChildEnv)
	os.Unsetenv(runChildEnv)
	os.Unsetenv(runUserNSEnv)
	pipe := os.NewFile(3, "gonet run")
	var b [1]byte
	if n, _ := pipe.Read(b[:]); n != 1 {
		// The parent failed to set up the network, and said why.
		return exitFail
	}
	pipe.Close()
	if resolv != "" {
		if err := bindResolvConf(resolv); err != nil {
			fmt.Fprintf(os.Stderr, "gonet run: warning: /etc/resolv.conf left as it is: %v\n", err)
		}
	}
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "gonet run: the namespace's process got no command")
		return exitFail
	}
	err := syscall.Exec(os.Args[1], os.Args[2:], os.Environ())
	fmt.Fprintf(os.Stderr, "gonet run: %s: %v\n", os.Args[1], err)
	return exitNotFound - 1 // 126: found but not executable, as the shell says
}

// bindResolvConf mounts path over /etc/resolv.conf, in this process's mount
// namespace alone: the mounts are made private first, so that the bind does
// not propagate back to the host's namespace (systemd makes / shared).
func bindResolvConf(path string) error {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the mounts private: %w", err)
	}
	if err := syscall.Mount(path, "/etc/resolv.conf", "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s: %w", path, err)
	}
	return nil
}
