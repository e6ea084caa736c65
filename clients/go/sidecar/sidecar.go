// Package sidecar serves a hookmesh middleware written in Go: implement the hook
// interfaces you need (OnReply, OnReasoning, OnModelCall, ...) on one type and pass it
// to Serve. The SDK runs the Intercept stream of docs/remote-protocol.md for you:
// multiplexing, per-invocation goroutines, deadlines, cancel, drain, the bearer token
// and gRPC health.
package sidecar

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	pb "github.com/hookmesh/hookmesh/clients/go/hookmeshv1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// MaxInvocations bounds the invocations running at once on one stream; the ones beyond
// are answered done{error TOO_MANY_INVOCATIONS} at once.
const MaxInvocations = 4096

// MaxMessageBytes is the largest Intercept message the SDK's server accepts (told to the
// agent in Describe).
const MaxMessageBytes = 64 << 20

// Middleware is what every middleware declares; the hooks are the optional interfaces
// below (a hook is served when the type implements its interface).
type Middleware interface {
	// Key names the middleware's state slice and the source of its errors.
	Key() string
}

// Hook options a middleware may declare by implementing Options.
type HookOptions struct {
	Mode          pb.HookMode
	Subscriptions []string
	ReadOnly      []string
}

// Options is implemented by a middleware that wants more than the defaults: each hook
// intercepts with no subscriptions, no context, failure mode closed.
type Options interface {
	Hooks() map[pb.Hook]HookOptions
	NeedsContext() bool
}

// Error is a middleware's own failure: it reaches the client with its reason and metadata.
type Error struct {
	Reason   string
	Message  string
	Metadata map[string]string
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

func replyError(err error) *pb.ReplyError {
	var own *Error
	if errors.As(err, &own) {
		return &pb.ReplyError{Reason: own.Reason, Message: own.Message, Metadata: own.Metadata}
	}
	return &pb.ReplyError{Reason: "MIDDLEWARE_FAILED", Message: err.Error()}
}

// aborted is the unary status for a hook's error: ABORTED with an ErrorInfo.
func aborted(err error) error {
	e := replyError(err)
	st, derr := status.New(codes.Aborted, e.Message).WithDetails(
		&errdetails.ErrorInfo{Reason: e.Reason, Domain: "hookmesh", Metadata: e.Metadata})
	if derr != nil {
		return status.Error(codes.Aborted, e.Message)
	}
	return st.Err()
}

// The hooks. Each receives the invocation (state, context, emit, mutate) and `next`, which
// runs the downstream; not calling next short-circuits.
type (
	// EventNext runs an event hook's downstream with optional overrides (nil for none); onItem
	// is called for each subscribed event and says whether to drop it (read-only events:
	// the answer is ignored). It returns the downstream's error, if any.
	EventNext func(over *pb.CallNext, onItem func(*pb.AgentEvent) (drop bool)) error
	OnReply   interface {
		OnReply(inv *Invocation, args *pb.ReplyArgs, next EventNext) error
	}
	OnReasoning interface {
		OnReasoning(inv *Invocation, args *pb.ReasoningArgs, next EventNext) error
	}
	OnActing interface {
		OnActing(inv *Invocation, args *pb.ActingArgs, next EventNext) error
	}
	// ModelNext runs the model call; onChunk sees each subscribed chunk of a stream. The
	// response is nil when the model streamed.
	ModelNext   func(over *pb.ModelCallOverrides, onChunk func(*pb.ModelChunk)) (*pb.ModelResponse, error)
	OnModelCall interface {
		// Returning a nil response keeps the downstream's.
		OnModelCall(inv *Invocation, args *pb.ModelCallArgs, next ModelNext) (*pb.ModelResponse, error)
	}
	PermissionNext    func() (*pb.PermissionDecision, error)
	OnCheckPermission interface {
		OnCheckPermission(inv *Invocation, args *pb.CheckPermissionArgs, next PermissionNext) (*pb.PermissionDecision, error)
	}
	OnCompressContext interface {
		OnCompressContext(inv *Invocation, args *pb.CompressContextArgs, next func() error) error
	}
	OnSystemPrompt interface {
		TransformSystemPrompt(ctx context.Context, req *pb.TransformSystemPromptRequest) (string, *pb.StateMutation, error)
	}
	AfterAgent interface {
		AfterAgent(ctx context.Context, req *pb.AfterAgentRequest) (*pb.StateMutation, error)
	}
	// Tools is implemented by a middleware that contributes tools.
	Tools interface {
		Tools() []Tool
	}
)

// Tool is a contributed tool: its spec and its run.
type Tool struct {
	Spec *pb.ToolSpec
	// Run streams the result with call.Text; an *Error with reason INVALID_ARGUMENTS
	// answers INVALID_ARGUMENT, any other error an error result.
	Run func(ctx context.Context, call *ToolCall) error
}

// ToolCall is one CallTool request and its response stream.
type ToolCall struct {
	*pb.CallToolRequest
	stream pb.MiddlewareService_CallToolServer
}

// Text appends text to the tool's result.
func (c *ToolCall) Text(text string) error {
	return c.stream.Send(&pb.CallToolResponse{Piece: &pb.CallToolResponse_Text{Text: text}})
}

// Emit sends an event to the reply's stream.
func (c *ToolCall) Emit(ev *pb.AgentEvent) error {
	return c.stream.Send(&pb.CallToolResponse{Piece: &pb.CallToolResponse_Event{Event: ev}})
}

// Mutate changes the reply's state slice or context.
func (c *ToolCall) Mutate(m *pb.StateMutation) error {
	return c.stream.Send(&pb.CallToolResponse{Piece: &pb.CallToolResponse_Mutate{Mutate: m}})
}

// InvalidArguments is the error a tool returns for arguments it cannot use.
func InvalidArguments(message string) error {
	return &Error{Reason: "INVALID_ARGUMENTS", Message: message}
}

// Config is how Serve runs.
type Config struct {
	// Listen is host:port (port 0 picks one) or unix:///path.
	Listen string
	// Token, when set, is required as `authorization: Bearer <token>` on every RPC but
	// health.
	Token string
	// FailOpen makes the sidecar prefer fail_open (the agent's configuration wins).
	FailOpen bool
	// Grace bounds the drain after ctx is done (default 10 s).
	Grace time.Duration
	// Ready is called with the address once the server listens.
	Ready func(addr string)
}

// Serve serves mw until ctx is done, then drains (docs/remote-protocol.md § Connecting):
// no new streams, each open stream ends with OK once idle or at the end of the grace
// period.
func Serve(ctx context.Context, mw Middleware, cfg Config) error {
	network, address := "tcp", cfg.Listen
	if strings.HasPrefix(address, "unix://") {
		network, address = "unix", strings.TrimPrefix(address, "unix://")
	}
	lis, err := net.Listen(network, address)
	if err != nil {
		return err
	}
	s := newService(mw, cfg)
	server := grpc.NewServer(
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.UnaryInterceptor(s.authUnary),
		grpc.StreamInterceptor(s.authStream),
	)
	pb.RegisterMiddlewareServiceServer(server, s)
	healthpb.RegisterHealthServer(server, s.health)
	if cfg.Ready != nil {
		addr := lis.Addr().String()
		if network == "unix" {
			addr = "unix://" + address
		}
		cfg.Ready(addr)
	}
	served := make(chan error, 1)
	go func() { served <- server.Serve(lis) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	grace := cfg.Grace
	if grace == 0 {
		grace = 10 * time.Second
	}
	close(s.draining)
	streamsOver := make(chan struct{})
	go func() { s.streams.Wait(); close(streamsOver) }()
	select {
	case <-streamsOver:
	case <-time.After(grace):
		close(s.graceOver)
		<-streamsOver
	}
	// The agent keeps its connection open: a graceful stop would wait for it, so unary
	// calls in flight get a second and then the server stops.
	stopped := make(chan struct{})
	go func() { server.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Second):
		server.Stop()
	}
	return nil
}

type service struct {
	pb.UnimplementedMiddlewareServiceServer
	mw        Middleware
	cfg       Config
	desc      *pb.DescribeResponse
	modes     map[pb.Hook]pb.HookMode
	tools     map[string]Tool
	health    *health.Server
	draining  chan struct{}
	graceOver chan struct{}
	streams   sync.WaitGroup
}

func newService(mw Middleware, cfg Config) *service {
	s := &service{mw: mw, cfg: cfg, modes: map[pb.Hook]pb.HookMode{}, tools: map[string]Tool{},
		health: health.NewServer(), draining: make(chan struct{}), graceOver: make(chan struct{})}
	s.desc = &pb.DescribeResponse{ProtocolVersion: 1, MiddlewareKey: mw.Key(),
		FailureMode: pb.FailureMode_FAILURE_MODE_CLOSED, MaxMessageBytes: MaxMessageBytes}
	if cfg.FailOpen {
		s.desc.FailureMode = pb.FailureMode_FAILURE_MODE_OPEN
	}
	var opts map[pb.Hook]HookOptions
	if o, ok := mw.(Options); ok {
		opts = o.Hooks()
		s.desc.NeedsContext = o.NeedsContext()
	}
	for _, h := range implemented(mw) {
		o := opts[h]
		if o.Mode == pb.HookMode_HOOK_MODE_UNSPECIFIED {
			o.Mode = pb.HookMode_HOOK_MODE_INTERCEPT
		}
		s.modes[h] = o.Mode
		s.desc.Hooks = append(s.desc.Hooks, &pb.HookSpec{Hook: h, Mode: o.Mode,
			Subscriptions: o.Subscriptions, ReadOnlySubscriptions: o.ReadOnly})
	}
	if t, ok := mw.(Tools); ok {
		for _, tool := range t.Tools() {
			s.tools[tool.Spec.Name] = tool
			s.desc.Tools = append(s.desc.Tools, tool.Spec)
		}
	}
	return s
}

func implemented(mw Middleware) []pb.Hook {
	var hooks []pb.Hook
	add := func(ok bool, h pb.Hook) {
		if ok {
			hooks = append(hooks, h)
		}
	}
	_, ok := mw.(OnReply)
	add(ok, pb.Hook_HOOK_ON_REPLY)
	_, ok = mw.(OnReasoning)
	add(ok, pb.Hook_HOOK_ON_REASONING)
	_, ok = mw.(OnModelCall)
	add(ok, pb.Hook_HOOK_ON_MODEL_CALL)
	_, ok = mw.(OnActing)
	add(ok, pb.Hook_HOOK_ON_ACTING)
	_, ok = mw.(OnCheckPermission)
	add(ok, pb.Hook_HOOK_ON_CHECK_PERMISSION)
	_, ok = mw.(OnCompressContext)
	add(ok, pb.Hook_HOOK_ON_COMPRESS_CONTEXT)
	_, ok = mw.(OnSystemPrompt)
	add(ok, pb.Hook_HOOK_ON_SYSTEM_PROMPT)
	_, ok = mw.(AfterAgent)
	add(ok, pb.Hook_HOOK_AFTER_AGENT)
	return hooks
}

func (s *service) authorized(ctx context.Context, method string) error {
	if s.cfg.Token == "" || strings.HasPrefix(method, "/grpc.health.v1.Health/") {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	values := md.Get("authorization")
	if len(values) == 1 && values[0] == "Bearer "+s.cfg.Token {
		return nil
	}
	return status.Error(codes.Unauthenticated, "a bearer token is required")
}

func (s *service) authUnary(ctx context.Context, req interface{}, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (interface{}, error) {
	if err := s.authorized(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *service) authStream(srv interface{}, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.authorized(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

func (s *service) Describe(context.Context, *pb.DescribeRequest) (*pb.DescribeResponse, error) {
	return s.desc, nil
}

func (s *service) TransformSystemPrompt(ctx context.Context, req *pb.TransformSystemPromptRequest) (*pb.TransformSystemPromptResponse, error) {
	h, ok := s.mw.(OnSystemPrompt)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "no on_system_prompt hook")
	}
	prompt, mutation, err := h.TransformSystemPrompt(ctx, req)
	if err != nil {
		return nil, aborted(err)
	}
	return &pb.TransformSystemPromptResponse{Prompt: prompt, Mutation: mutation}, nil
}

func (s *service) AfterAgent(ctx context.Context, req *pb.AfterAgentRequest) (*pb.AfterAgentResponse, error) {
	h, ok := s.mw.(AfterAgent)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "no after_agent hook")
	}
	mutation, err := h.AfterAgent(ctx, req)
	if err != nil {
		var own *Error
		if errors.As(err, &own) && own.Reason == "INVALID_ARGUMENT" {
			return nil, status.Error(codes.InvalidArgument, own.Message)
		}
		return nil, aborted(err)
	}
	return &pb.AfterAgentResponse{Mutation: mutation}, nil
}

func (s *service) CallTool(req *pb.CallToolRequest, stream pb.MiddlewareService_CallToolServer) error {
	tool, ok := s.tools[req.Name]
	if !ok {
		return status.Errorf(codes.NotFound, "this sidecar has no tool %q", req.Name)
	}
	err := tool.Run(stream.Context(), &ToolCall{CallToolRequest: req, stream: stream})
	var own *Error
	if errors.As(err, &own) && own.Reason == "INVALID_ARGUMENTS" {
		return status.Error(codes.InvalidArgument, own.Message)
	}
	end := pb.ToolResultState_TOOL_RESULT_STATE_SUCCESS
	if err != nil {
		end = pb.ToolResultState_TOOL_RESULT_STATE_ERROR
		if serr := stream.Send(&pb.CallToolResponse{Piece: &pb.CallToolResponse_Text{Text: "Error: " + err.Error()}}); serr != nil {
			return serr
		}
	}
	return stream.Send(&pb.CallToolResponse{Piece: &pb.CallToolResponse_End{End: end}})
}
