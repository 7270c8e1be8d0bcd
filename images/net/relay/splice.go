package relay

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// PipeFiles is how many file descriptors a tunnel between two TCP sockets holds besides the
// two sockets: a pipe (two descriptors) for each direction, for as long as the tunnel lasts.
// net's file budget counts them (images/net limits.files).
const PipeFiles = 4

// spliceChunk is the most one splice(2) moves into the pipe, and the size each pipe asks for
// (F_SETPIPE_SZ; Go's own splice asks for 1 MiB). hack/bench-net.sh's plain-bytes figure cost
// net 1.41× the stdlib proxy's CPU per MB with the kernel's default 64 KiB pipes and 1.16× at
// 256 KiB, the throughput the same. The bound on memory: the kernel gives one user's pipes
// past pipe-user-pages-soft (64 MiB by default) two pages each, which still work, at more calls
// per byte; so 384 tunnels' 768 pipes hold about 64 MiB at most.
const spliceChunk = 256 << 10

// kernelCopy moves src's bytes to dst by splice(2) through a pipe of its own, closed when it
// returns, until src ends (nil) or either side fails. The bytes never pass through this
// process.
//
// io.Copy between two TCP sockets splices too, but through pipes from the Go runtime's pool,
// which keeps them open after the copy until the collector empties it (two collections):
// under a burst of tunnels net held hundreds of such pipes more than its file budget knew of,
// reached its file limit, and failed to dial for allowed tunnels (docs/load.md). A pipe per
// copy, closed with it, is a count the budget can hold.
func kernelCopy(dst, src *net.TCPConn) (int64, error) {
	rc, err := src.SyscallConn()
	if err != nil {
		return 0, err
	}
	wc, err := dst.SyscallConn()
	if err != nil {
		return 0, err
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return 0, err
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	unix.FcntlInt(uintptr(p[0]), unix.F_SETPIPE_SZ, spliceChunk) // a smaller pipe works, at more calls
	var total int64
	for {
		// The pipe is empty here, so EAGAIN means src has nothing to read: wait for it.
		var n int
		var serr error
		if err := rc.Read(func(fd uintptr) bool {
			n, serr = spliceOnce(int(fd), p[1], spliceChunk)
			return serr != unix.EAGAIN
		}); err != nil {
			return total, err // a deadline, or the socket closed
		}
		if serr != nil {
			return total, serr
		}
		if n == 0 {
			return total, nil // src's end
		}
		// Everything in the pipe goes to dst before the next read: EAGAIN means dst's send
		// buffer is full.
		for n > 0 {
			var m int
			var werr error
			if err := wc.Write(func(fd uintptr) bool {
				m, werr = spliceOnce(p[0], int(fd), n)
				return werr != unix.EAGAIN
			}); err != nil {
				return total, err
			}
			if werr != nil {
				return total, werr
			}
			if m == 0 {
				return total, errors.New("splice to the peer moved nothing")
			}
			n -= m
			total += int64(m)
		}
	}
}

// spliceOnce is one splice(2) of up to max bytes from in to out, again on EINTR.
func spliceOnce(in, out, max int) (int, error) {
	for {
		n, err := unix.Splice(in, nil, out, nil, max, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		return int(n), nil
	}
}
