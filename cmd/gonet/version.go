package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is GoNet's release, set at link time with
// -ldflags "-X main.version=v1.2.3"; empty in a development build, where the
// module version and VCS revision from the build information stand in.
var version string

var versionCommand = &command{
	name:    "version",
	summary: "print GoNet's version",
	usage:   "gonet version",
	about:   "Prints the version of gonet, and the Go release and platform it was built with.",
	flags:   func() *flag.FlagSet { return newFlagSet("version") },
	run:     runVersion,
}

func runVersion(_ context.Context, cmd *command, out *output, args []string) int {
	fs := newFlagSet("version")
	if err := fs.Parse(args); err != nil {
		return reportParseError(out, cmd, err)
	}
	if fs.NArg() > 0 {
		return reportParseError(out, cmd, usagef("unexpected argument %q: version takes none", fs.Arg(0)))
	}
	fmt.Fprintf(out.stdout, "gonet %s %s %s/%s\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}

// versionString returns the release set at link time, or else what the
// build information knows: the module version, and the VCS revision with a
// "+dirty" mark for uncommitted changes.
func versionString() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += " " + rev + dirty
	}
	return v
}
