package main

import (
	"context"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// rpcCounter counts what the client sends etcd, below clientv3 (which resumes
// its watches by itself, out of its user's sight): watch creates, cancels and
// progress requests on Watch streams, and Range calls.
type rpcCounter struct {
	creates, cancels, progress, ranges atomic.Int64
}

func (c *rpcCounter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if method == "/etcdserverpb.KV/Range" {
		c.ranges.Add(1)
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *rpcCounter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Watch/Watch" {
		return s, err
	}
	return &countingStream{ClientStream: s, c: c}, nil
}

type countingStream struct {
	grpc.ClientStream
	c *rpcCounter
}

func (s *countingStream) SendMsg(m any) error {
	if r, ok := m.(*pb.WatchRequest); ok {
		switch r.RequestUnion.(type) {
		case *pb.WatchRequest_CreateRequest:
			s.c.creates.Add(1)
		case *pb.WatchRequest_CancelRequest:
			s.c.cancels.Add(1)
		case *pb.WatchRequest_ProgressRequest:
			s.c.progress.Add(1)
		}
	}
	return s.ClientStream.SendMsg(m)
}

// sample logs the counts whenever they change (every 100 ms).
func (c *rpcCounter) sample(ctx context.Context, lg *obsLog) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var last [4]int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v := [4]int64{c.creates.Load(), c.cancels.Load(), c.progress.Load(), c.ranges.Load()}
		if v != last {
			last = v
			lg.line("W", time.Now().UnixNano(), v[0], v[1], v[2], v[3])
		}
	}
}
