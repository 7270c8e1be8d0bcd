package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	workloadpb "github.com/spiffe/go-spiffe/v2/proto/spiffe/workload"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// socketName is the Workload API socket in each role's identity folder (compose sets
// SPIFFE_ENDPOINT_SOCKET=unix://<identity root>/<role>/agent.sock).
const socketName = "agent.sock"

// securityHeader is the metadata a Workload API client must send, as SPIRE requires: it shows the
// call was meant, against request forgery (SPIFFE Workload Endpoint specification).
const securityHeader = "workload.spiffe.io"

// endpoint serves one role's SVID, and nothing else, over the SPIFFE Workload API. The JWT and
// WIT methods answer codes.Unimplemented through the embedded type.
type endpoint struct {
	workloadpb.UnimplementedSpiffeWorkloadAPIServer
	trustDomain string
	caDER       []byte
	svid        svid
}

// FetchX509SVID sends the role's SVID with the session bundle, then holds the stream open until
// the client goes away: there is no rotation within a session.
func (e *endpoint) FetchX509SVID(_ *workloadpb.X509SVIDRequest, stream grpc.ServerStreamingServer[workloadpb.X509SVIDResponse]) error {
	return sendAndHold(stream, &workloadpb.X509SVIDResponse{Svids: []*workloadpb.X509SVID{{
		SpiffeId:    e.svid.id,
		X509Svid:    e.svid.certDER,
		X509SvidKey: e.svid.keyDER,
		Bundle:      e.caDER,
	}}})
}

// FetchX509Bundles sends the session bundle, then holds the stream open.
func (e *endpoint) FetchX509Bundles(_ *workloadpb.X509BundlesRequest, stream grpc.ServerStreamingServer[workloadpb.X509BundlesResponse]) error {
	return sendAndHold(stream, &workloadpb.X509BundlesResponse{Bundles: map[string][]byte{e.trustDomain: e.caDER}})
}

func sendAndHold[T any](stream grpc.ServerStreamingServer[T], msg *T) error {
	if err := stream.Send(msg); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func requireHeader(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(securityHeader); len(v) != 1 || v[0] != "true" {
		return status.Error(codes.PermissionDenied, "security header missing from request")
	}
	return nil
}

// newServer returns the gRPC server of one role's socket.
func newServer(ids *identities, role string) *grpc.Server {
	srv := grpc.NewServer(
		grpc.MaxRecvMsgSize(4<<10), // requests are empty or a few names
		grpc.MaxConcurrentStreams(16),
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := requireHeader(ctx); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(s any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := requireHeader(ss.Context()); err != nil {
				return err
			}
			return h(s, ss)
		}),
	)
	workloadpb.RegisterSpiffeWorkloadAPIServer(srv, &endpoint{trustDomain: ids.trustDomain, caDER: ids.caDER, svid: ids.svids[role]})
	return srv
}

func socketPath(root, role string) string { return filepath.Join(root, role, socketName) }

// listen opens role's socket in its identity folder, replacing a stale socket (and nothing
// else). It never makes the folder: a role whose volume is not mounted gets no socket. The socket
// is world-connectable: the volume's directory mode and group decide who reaches it.
func listen(root, role string) (net.Listener, error) {
	path := socketPath(root, role)
	fi, err := os.Lstat(path)
	switch {
	case err == nil && fi.Mode().Type() != fs.ModeSocket:
		return nil, fmt.Errorf("refusing to replace %s: not a socket", path)
	case err == nil:
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("stat socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return ln, nil
}
