package probe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/sharness-ai/sharness/host/doctor"
	"github.com/sharness-ai/sharness/host/engine"
)

// Image is the image DNSLeak runs: the demo agent, whose busybox has nslookup.
const Image = "sharness/agent:dev"

// probeZone is where the probe's names live; .invalid never resolves (RFC 6761 §6.4).
const probeZone = ".sharness-doctor.invalid"

// DNSLeak watches for the leak of CVE-2024-29018: a resolver on the host's 127.0.0.1:53 that
// records what it is asked (and refuses it), a fresh internal network, and a container on it
// whose resolver is 127.0.0.1 looking up a random name. An engine that forwards the query from
// the host's namespace makes it arrive. Everything it creates is named sharness-doctor-<random>
// and removed (e2e/stack_test.go's controlCVECondition does the same).
//
// Moby 20.10 at least takes --dns 127.0.0.x as the container's own loopback and forwards only
// loopback resolvers of the host's resolv.conf from the host's namespace, which doctor's engine
// check reads: silence here does not clear an engine the engine check calls leaky.
func DNSLeak(ctx context.Context, env Env, image string) doctor.Live {
	pc, err := env.Listen("udp4", "127.0.0.1:53")
	if err != nil {
		return doctor.Live{Skip: fmt.Sprintf("cannot listen on the host's 127.0.0.1:53 (%v): the probe needs that port free "+
			"(is a local resolver on it?) and root or CAP_NET_BIND_SERVICE", err)}
	}
	defer pc.Close()
	token := randomToken()
	seen := make(chan string, 16)
	go record(pc, token, seen)
	if err := selfTest(pc.LocalAddr().String(), "self-"+token+probeZone, seen); err != nil {
		return doctor.Live{Ran: true, Err: err}
	}
	if _, err := env.Engine.ImageID(ctx, image); err != nil {
		return doctor.Live{Skip: fmt.Sprintf("no image %s here (%v): build it with hack/build-images.sh", image, err)}
	}
	name := "sharness-doctor-" + token
	if err := env.Engine.CreateNetwork(ctx, engine.Network{Name: name, Internal: true, Labels: []string{"ai.sharness.doctor=1"}}); err != nil {
		return doctor.Live{Ran: true, Err: fmt.Errorf("create network %s: %w", name, err)}
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		env.Engine.RemoveContainer(ctx, name) // Run removes it, unless the engine stopped answering
		env.Engine.RemoveNetwork(ctx, name)
	}()
	query := token + probeZone
	err = env.Engine.Run(ctx, engine.RunSpec{Name: name, Image: image, Network: name, DNS: "127.0.0.1",
		Entrypoint: "/bin/busybox", Args: []string{"nslookup", query}})
	// nslookup fails (nothing resolves the name): only whether its query left matters. An error
	// without an exit code is the engine's own (the container did not run); codes 125 and up are
	// not nslookup's answer (busybox could not run it, or the container was killed).
	var exit interface{ ExitCode() int }
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() < 1 || exit.ExitCode() >= 125) {
		return doctor.Live{Ran: true, Err: fmt.Errorf("run the probe container: %w", err)}
	}
	l := doctor.Live{Ran: true}
	for grace := time.After(time.Second); ; {
		select {
		case n := <-seen:
			if n == query && len(l.Leaked) == 0 { // A and AAAA: one is enough
				l.Leaked = append(l.Leaked, n)
			}
		case <-grace:
			return l
		}
	}
}

func randomToken() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// record answers every query on pc with REFUSED (so resolvers move on quickly) and passes on
// the lower-cased names that carry token.
func record(pc net.PacketConn, token string, seen chan<- string) {
	buf := make([]byte, 1500)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil || h.Response {
			continue
		}
		q, err := p.Question()
		if err != nil {
			continue
		}
		if name := strings.TrimSuffix(strings.ToLower(q.Name.String()), "."); strings.Contains(name, token) {
			select {
			case seen <- name:
			default:
			}
		}
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, RCode: dnsmessage.RCodeRefused})
		b.StartQuestions()
		b.Question(q)
		if msg, err := b.Finish(); err == nil {
			pc.WriteTo(msg, from)
		}
	}
}

// selfTest sends a query to the listener and waits for it to be recorded: its silence later
// means something only if it hears at all.
func selfTest(addr, name string, seen <-chan string) error {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1, RecursionDesired: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	msg, err := b.Finish()
	if err != nil {
		return err
	}
	c, err := net.Dial("udp4", addr)
	if err != nil {
		return fmt.Errorf("the probe's resolver self-test: %w", err)
	}
	defer c.Close()
	c.Write(msg)
	for timeout := time.After(2 * time.Second); ; {
		select {
		case n := <-seen:
			if n == name {
				return nil
			}
		case <-timeout:
			return errors.New("the probe's resolver did not hear its own test query: it could not see a leak either")
		}
	}
}
