package probe

import "golang.org/x/sys/unix"

// landlockABI asks the kernel for its Landlock ABI version: landlock_create_ruleset(NULL, 0,
// LANDLOCK_CREATE_RULESET_VERSION) returns it, or fails with ENOSYS or EOPNOTSUPP.
func landlockABI() (int, error) {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(abi), nil
}

// memfdSecret tries memfd_secret(2) the way kms does (images/kms/hygiene) and closes the fd.
func memfdSecret() error {
	fd, _, errno := unix.Syscall(unix.SYS_MEMFD_SECRET, unix.O_CLOEXEC, 0, 0)
	if errno != 0 {
		return errno
	}
	return unix.Close(int(fd))
}
