package main

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestDeniedResult(t *testing.T) {
	tests := []struct {
		name   string
		errno  unix.Errno
		wantOK bool
		want   string
	}{
		{name: "denied by seccomp", errno: unix.EPERM, wantOK: true, want: "EPERM"},
		{name: "allowed", errno: 0, want: "succeeded"},
		{name: "reached the kernel", errno: unix.EINVAL, want: "EINVAL"},
		{name: "unknown to the kernel or filtered with ENOSYS", errno: unix.ENOSYS, want: "ENOSYS"},
		{name: "refused by permissions, not seccomp", errno: unix.EACCES, want: "EACCES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := deniedResult("probe", false, 0, tt.errno)
			if got.OK != tt.wantOK || got.Got != tt.want || got.Expected != "EPERM" || got.Check != "probe" {
				t.Errorf("deniedResult(%v) = %+v, want ok=%v got=%q expected=EPERM", tt.errno, got, tt.wantOK, tt.want)
			}
		})
	}
}
