// Package runc is runc's command-line contract, as sharness-runtime (host/shim) needs it to stand
// in for runc: how runc parses its argv (Parse), what process an exec starts and what resources an
// update applies (Command.Process, Command.Resources), how to ask runc for a container's bundle
// (Bundle), where the runc to hand over to is (Find), how to hand a command over to it (Exec) and
// what a command that fails before runc runs exits with (FailureStatus). It decides nothing:
// host/shim does.
//
// What it does not guarantee: it follows runc 1.1's command line (plus 1.2's pidfd-socket and
// cpu-idle) and runc 1.1's getProcess; a runc that parses its flags or builds an exec's process
// differently is read as runc 1.1 would be. A flag it does not know on a command the shim polices
// is an error rather than a guess, so the shim refuses what it cannot read.
package runc

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Command is what the shim needs to know of one runc command line. It is parsed the way runc
// (urfave/cli v1 over Go's flag package) parses it: `-x` and `--x` alike, `--x v` and `--x=v`,
// the last of a repeated single-valued flag wins, and for every command but exec the flags may
// follow the positional arguments (urfave's argument reordering; runc's exec sets SkipArgReorder).
type Command struct {
	Root, Log, LogFormat string // runc's global flags the shim uses
	Name                 string // "" when runc runs no command: only global flags, or a help or version flag
	ID                   string // the container id, first positional argument
	flags                map[string][]string
}

// Flag returns the last value of a command flag, by its canonical name, and whether it was given
// at all.
func (c Command) Flag(name string) (string, bool) {
	v := c.flags[name]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// flagSet maps every spelling of a flag to its canonical name and says whether it takes a value.
type flagSet map[string]struct {
	name  string
	value bool
}

func newFlagSet(value, boolean []string) flagSet {
	fs := flagSet{}
	for kind, list := range [2][]string{boolean, value} {
		for _, spec := range list { // "bundle,b": canonical name first, then aliases
			names := strings.Split(spec, ",")
			for _, n := range names {
				fs[n] = struct {
					name  string
					value bool
				}{names[0], kind == 1}
			}
		}
	}
	return fs
}

var (
	globalFlags = newFlagSet(
		[]string{"log", "log-format", "root", "criu", "rootless"},
		[]string{"debug", "systemd-cgroup", "help,h", "version,v"})
	// commandFlags lists runc's own flags (1.1, plus 1.2's pidfd-socket and cpu-idle) for the
	// commands the shim polices. Any other flag on these commands is refused: runc would refuse
	// it too, and guessing whether it takes a value could misplace the bundle or container id.
	commandFlags = map[string]flagSet{
		"create": newFlagSet(
			[]string{"bundle,b", "console-socket", "pidfd-socket", "pid-file", "preserve-fds"},
			[]string{"no-pivot", "no-new-keyring", "help,h"}),
		"run": newFlagSet(
			[]string{"bundle,b", "console-socket", "pidfd-socket", "pid-file", "preserve-fds"},
			[]string{"detach,d", "keep", "no-subreaper", "no-pivot", "no-new-keyring", "help,h"}),
		"restore": newFlagSet(
			[]string{"bundle,b", "console-socket", "image-path", "work-path", "manage-cgroups-mode",
				"pid-file", "empty-ns", "lsm-profile", "lsm-mount-context"},
			[]string{"tcp-established", "ext-unix-sk", "shell-job", "file-locks", "detach,d",
				"no-subreaper", "no-pivot", "auto-dedup", "lazy-pages", "help,h"}),
		"exec": newFlagSet(
			[]string{"console-socket", "pidfd-socket", "cwd", "env,e", "user,u", "additional-gids,g",
				"process,p", "pid-file", "process-label", "apparmor", "cap,c", "preserve-fds", "cgroup"},
			[]string{"tty,t", "detach,d", "no-new-privs", "ignore-paused", "help,h"}),
		"update": newFlagSet(
			[]string{"resources,r", "blkio-weight", "cpu-period", "cpu-quota", "cpu-share",
				"cpu-rt-period", "cpu-rt-runtime", "cpuset-cpus", "cpuset-mems", "kernel-memory",
				"kernel-memory-tcp", "memory", "cpu-idle", "memory-reservation", "memory-swap",
				"pids-limit", "l3-cache-schema", "mem-bw-schema"},
			[]string{"help,h"}),
	}
)

// Parse parses runc's argv without argv[0]. Commands the shim does not police keep only their
// name: their arguments go to runc untouched.
func Parse(args []string) (Command, error) {
	cmd := Command{flags: map[string][]string{}}
	var help, version bool
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			break
		}
		name, val, n, err := parseFlag(globalFlags, args, i)
		if err != nil {
			return cmd, err
		}
		i = n
		switch name {
		case "root":
			cmd.Root = val
		case "log":
			cmd.Log = val
		case "log-format":
			cmd.LogFormat = val
		case "help":
			help = val == "true"
		case "version":
			version = val == "true"
		}
	}
	if i < len(args) && args[i] == "--" {
		i++
	}
	// With --help or --version runc prints and runs no command (urfave/cli's App.Run checks both
	// before it dispatches). Go's flag package keeps the last value of a repeated flag; -h and
	// --help together are an error before any command runs.
	if i == len(args) || help || version {
		return cmd, nil
	}
	cmd.Name = args[i]
	fs, policed := commandFlags[cmd.Name]
	if !policed {
		return cmd, nil
	}
	var positional []string
	for i++; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if a == "-" || !strings.HasPrefix(a, "-") {
			if cmd.Name == "exec" { // SkipArgReorder: the rest is the id and the command
				positional = append(positional, args[i:]...)
				break
			}
			positional = append(positional, a)
			continue
		}
		name, val, n, err := parseFlag(fs, args, i)
		if err != nil {
			return cmd, fmt.Errorf("%s: %w", cmd.Name, err)
		}
		i = n
		cmd.flags[name] = append(cmd.flags[name], val)
	}
	if v, _ := cmd.Flag("help"); v == "true" {
		// runc shows the command's help and runs nothing (urfave/cli's checkCommandHelp), so there
		// is nothing to police: `runc create -h` reads no bundle, as `runc help create` does.
		return Command{Root: cmd.Root, Log: cmd.Log, LogFormat: cmd.LogFormat, flags: map[string][]string{}}, nil
	}
	if len(positional) > 0 {
		cmd.ID = positional[0]
	}
	return cmd, nil
}

// parseFlag parses the flag at args[i] and returns its canonical name, its value ("true" or
// "false" for a boolean) and the index of the last argument it used.
func parseFlag(fs flagSet, args []string, i int) (name, val string, last int, err error) {
	a := strings.TrimPrefix(strings.TrimPrefix(args[i], "-"), "-")
	name, val, hasVal := strings.Cut(a, "=")
	f, ok := fs[name]
	if name == "" || !ok {
		return "", "", 0, fmt.Errorf("flag provided but not defined: %q", args[i])
	}
	switch {
	case !f.value && !hasVal:
		val = "true"
	case !f.value:
		b, perr := strconv.ParseBool(val)
		if perr != nil {
			return "", "", 0, fmt.Errorf("invalid boolean value %q for flag -%s", val, name)
		}
		val = strconv.FormatBool(b)
	case !hasVal:
		if i+1 >= len(args) {
			return "", "", 0, errors.New("flag needs an argument: -" + name)
		}
		i++
		val = args[i]
	}
	return f.name, val, i, nil
}

// ValidID is runc's own rule for container ids (^[\w+-\.]+$, not . or ..), for the shim to check
// so that an id can never be read as a flag or a path by `runc state`.
func ValidID(id string) bool {
	if id == "" || id == "." || id == ".." || id[0] == '-' {
		return false
	}
	for _, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_+-.", c)
		if !ok {
			return false
		}
	}
	return true
}

// FailureStatus is what a command that fails before runc runs exits with: 255 for exec, as
// runc's own exec failures do, so that it cannot be mistaken for the exec'd process exiting 1; 1
// otherwise.
func FailureStatus(args []string) int {
	if c, _ := Parse(args); c.Name == "exec" {
		return 255
	}
	return 1
}
