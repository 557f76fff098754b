package grpcidem

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/coordkit/coordkit/idempotency"
)

// Metadata keys.
const (
	MetadataKey = "idempotency-key"     // request: the client's key
	ReplayedKey = "idempotent-replayed" // response header: "true" on a replay
	typeHeader  = "Proto-Message"       // stored with the response: its full name
)

// UnaryServerInterceptor returns an interceptor that runs each protected call at
// most once per key with store.Do: the handler runs in Do's transaction and its
// response message is stored (deterministically marshalled) with the key. A handler
// error rolls the effect and the key back and is returned as is. Request and
// response must be proto messages; a replayed response type must be linked into the
// binary (protoregistry.GlobalTypes). Database failures are Unavailable with a
// fixed message (retrying with the same key is safe); their cause goes to
// Config.Logger.
//
// It returns a *ConfigError for a nil store or a missing Scope.
func UnaryServerInterceptor(store *idempotency.Store, cfg Config) (grpc.UnaryServerInterceptor, error) {
	if store == nil {
		return nil, &ConfigError{Field: "store", Reason: "nil"}
	}
	o := cfg.withDefaults(store)
	if err := o.validate(); err != nil {
		return nil, err
	}
	var methods map[string]bool
	if len(o.Methods) > 0 {
		methods = map[string]bool{}
		for _, m := range o.Methods {
			methods[m] = true
		}
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if methods != nil && !methods[info.FullMethod] {
			return handler(ctx, req)
		}
		md, _ := metadata.FromIncomingContext(ctx)
		vals := md.Get(MetadataKey)
		if len(vals) == 0 {
			if o.Optional {
				return handler(ctx, req)
			}
			return nil, status.Error(codes.InvalidArgument, "missing idempotency-key metadata")
		}
		if len(vals) > 1 {
			return nil, status.Error(codes.InvalidArgument, "idempotency-key given more than once")
		}
		if err := idempotency.ValidateKeyID(vals[0]); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		scope, err := o.Scope(ctx, info.FullMethod)
		if err != nil {
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
		msg, ok := req.(proto.Message)
		if !ok {
			return nil, status.Errorf(codes.Internal, "grpcidem: request %T is not a proto message", req)
		}
		body, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "grpcidem: marshal request: %v", err)
		}
		key := idempotency.Key{Scope: scope, ID: vals[0]}
		fp := idempotency.FingerprintOf([]byte(info.FullMethod), body)
		var fresh any
		res, err := store.Do(ctx, key, fp, func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
			resp, err := handler(idempotency.ContextWithTx(ctx, tx), req)
			if err != nil {
				return idempotency.Response{}, handlerError{err}
			}
			m, ok := resp.(proto.Message)
			if !ok {
				return idempotency.Response{}, fmt.Errorf("grpcidem: response %T is not a proto message", resp)
			}
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				return idempotency.Response{}, err
			}
			fresh = resp
			return idempotency.Response{Header: map[string][]string{typeHeader: {string(m.ProtoReflect().Descriptor().FullName())}}, Body: b}, nil
		}, nil)
		if err == nil && !res.Replayed {
			return fresh, nil
		}
		if err == nil {
			return replay(ctx, res.Response)
		}
		return nil, toStatus(ctx, err, func() {
			o.Logger.ErrorContext(ctx, "grpcidem: idempotency store failed; answered Unavailable",
				"method", info.FullMethod, "key", key.String(), "err", err)
		})
	}, nil
}

// handlerError carries the handler's own error through Store.Do unchanged.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }
func (e handlerError) Unwrap() error { return e.err }

func replay(ctx context.Context, r idempotency.Response) (any, error) {
	name := r.Header.Get(typeHeader)
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpcidem: stored response type %q: %v", name, err)
	}
	m := mt.New().Interface()
	if err := proto.Unmarshal(r.Body, m); err != nil {
		return nil, status.Errorf(codes.Internal, "grpcidem: stored response: %v", err)
	}
	_ = grpc.SetHeader(ctx, metadata.Pairs(ReplayedKey, "true"))
	return m, nil
}

// toStatus maps an error of Store.Do to the call's status; storeFailed is called
// when the store itself failed.
func toStatus(ctx context.Context, err error, storeFailed func()) error {
	var (
		he  handlerError
		me  *idempotency.MismatchError
		ife *idempotency.InFlightError
		ke  *idempotency.KeyError
	)
	switch {
	case errors.As(err, &he):
		return he.err
	case errors.As(err, &me):
		return status.Error(codes.FailedPrecondition, me.Error())
	case errors.As(err, &ife):
		st, derr := status.New(codes.Aborted, ife.Error()).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(ife.RetryAfter)})
		if derr != nil {
			st = status.New(codes.Aborted, ife.Error())
		}
		_ = grpc.SetTrailer(ctx, metadata.Pairs("retry-after", strconv.Itoa(int(ife.RetryAfter.Seconds()))))
		return st.Err()
	case errors.As(err, &ke):
		return status.Error(codes.InvalidArgument, ke.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, idempotency.ErrResponseTooLarge):
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	// The cause names database users, hosts and tables: it goes to the log, not to
	// the remote client.
	storeFailed()
	return status.Error(codes.Unavailable, "idempotency store unavailable; retry with the same key")
}
