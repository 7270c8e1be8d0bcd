//go:build !linux

package probe

import "syscall"

// SHarness runs on Linux; elsewhere the kernel checks report the features missing.
func landlockABI() (int, error) { return 0, syscall.ENOSYS }

func memfdSecret() error { return syscall.ENOSYS }
