package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	pb "github.com/hookmesh/hookmesh/clients/go/hookmeshv1"
	"google.golang.org/protobuf/types/known/structpb"
)

// DownstreamError is what next returns when the downstream failed. Returning it from the
// hook ends the hook with a plain done: the agent then raises the downstream's own error.
// Calling next again instead retries the downstream.
type DownstreamError struct{ *pb.ReplyError }

func (e *DownstreamError) Error() string { return e.Reason + ": " + e.Message }

// Invocation is one onion-hook invocation: what the agent sent, and the ways to answer.
type Invocation struct {
	*pb.HookInvocation
	ID     string
	ctx    context.Context
	cancel context.CancelFunc
	send   func(*pb.InterceptResponse) error
	spec   *pb.HookSpec
	box    *mailbox

	mu       sync.Mutex
	ended    bool
	heard    time.Time
	state    *structpb.Struct
	finished bool // the agent expects nothing more (done, final or pre_only)
	passing  bool // PassRest ran: the next verdict is final
}

// Ctx is cancelled when the agent cancels the invocation or the stream ends.
func (i *Invocation) Ctx() context.Context { return i.ctx }

// Deadline is when the agent gives up waiting for the answer it expects now.
func (i *Invocation) Deadline() time.Time {
	i.mu.Lock()
	defer i.mu.Unlock()
	timeout := 5 * time.Second
	if d := i.MessageTimeout; d != nil {
		timeout = d.AsDuration()
	}
	return i.heard.Add(timeout)
}

// State is the middleware's state slice as the agent last sent it.
func (i *Invocation) State() map[string]interface{} {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.state.AsMap()
}

// SetState replaces the whole state slice (send every key you keep).
func (i *Invocation) SetState(state map[string]interface{}) error {
	s, err := structpb.NewStruct(state)
	if err != nil {
		return err
	}
	i.mu.Lock()
	i.state = s
	i.mu.Unlock()
	return i.Mutate(&pb.StateMutation{State: s})
}

// Emit yields an event upstream (an empty reply_id is the invocation's).
func (i *Invocation) Emit(ev *pb.AgentEvent) error {
	return i.answer(&pb.InterceptResponse{Message: &pb.InterceptResponse_Emit{Emit: ev}})
}

// Mutate changes the state or the context, applied when it arrives.
func (i *Invocation) Mutate(m *pb.StateMutation) error {
	return i.answer(&pb.InterceptResponse{Message: &pb.InterceptResponse_Mutate{Mutate: m}})
}

func (i *Invocation) observed() bool { return i.spec.Mode == pb.HookMode_HOOK_MODE_OBSERVE }

// answer sends one message unless the invocation ended or is observed (never answered).
func (i *Invocation) answer(r *pb.InterceptResponse) error { return i.sendLocked(r, false) }

// finish sends the invocation's last message (nil: none) and ends it.
func (i *Invocation) finish(r *pb.InterceptResponse) { _ = i.sendLocked(r, true) }

// sendLocked checks and sends under the lock, so nothing follows the last message even
// when End runs on another goroutine.
func (i *Invocation) sendLocked(r *pb.InterceptResponse, last bool) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.ended || i.finished {
		return nil
	}
	i.finished = last
	if r == nil || i.observed() {
		return nil
	}
	r.InvocationId = i.ID
	return i.send(r)
}

// ErrEnded is what next returns once End ended the invocation; return it (or nil) from
// the hook: the done was sent.
var ErrEnded = errors.New("the hook ended the invocation with End")

// End ends the invocation now with `result` (nil: a plain done), typically while the
// downstream runs and a deadline of your own passed (docs/remote-protocol.md § Ending a
// hook while its downstream runs): the agent stops the downstream, drops its remaining
// items and takes this done as the hook's answer; for an event hook the emits sent so far
// replace the rest of the downstream. For on_model_call the result must carry a
// ModelResponse or an Error, and once a stream started an Error or nothing. A blocked next
// returns ErrEnded and whatever the agent sent meanwhile is ignored. Safe from any
// goroutine (a time.AfterFunc, an onItem callback); a no-op once the invocation ended.
func (i *Invocation) End(result *pb.HookDone) {
	if result == nil {
		result = &pb.HookDone{}
	}
	i.finish(&pb.InterceptResponse{Message: &pb.InterceptResponse_Done{Done: result}})
	i.box.put(nil) // wakes a next blocked on the agent's next message
}

// PassRest says the event hook needs nothing more from its downstream; call it in onItem.
// That item's verdict (or, called elsewhere, the next verdict) goes as verdict {final: true}
// (dropped if onItem returns true), next returns nil and the agent passes the rest of the
// downstream without a round trip; nothing more is sent for the invocation (no done, no
// emit). A no-op in observe mode and once the invocation ended.
func (i *Invocation) PassRest() {
	i.mu.Lock()
	i.passing = true
	i.mu.Unlock()
}

var errCancelled = errors.New("the invocation was cancelled")

// recv waits for the agent's next message for this invocation.
func (i *Invocation) recv() (*pb.InterceptRequest, error) {
	r, ok := i.box.get(i.ctx)
	if !ok {
		return nil, errCancelled
	}
	if i.done() {
		return nil, ErrEnded // End ran: what the agent sent meanwhile is ignored
	}
	i.mu.Lock()
	i.heard = time.Now()
	var st *structpb.Struct
	switch m := r.Message.(type) {
	case *pb.InterceptRequest_Item:
		st = m.Item.State
	case *pb.InterceptRequest_Outcome:
		st = m.Outcome.State
	}
	if st != nil {
		i.state = st
	}
	i.mu.Unlock()
	return r, nil
}

func callNext(over *pb.CallNext) *pb.InterceptResponse {
	if over == nil {
		over = &pb.CallNext{}
	}
	return &pb.InterceptResponse{Message: &pb.InterceptResponse_CallNext{CallNext: over}}
}

// startDownstream sends call_next; false when nothing more comes (pre_only, final).
func (i *Invocation) startDownstream(over *pb.CallNext) bool {
	if i.observed() {
		return true
	}
	if i.spec.Mode == pb.HookMode_HOOK_MODE_PRE_ONLY || over.GetFinal() {
		i.finish(callNext(over))
		return false
	}
	_ = i.answer(callNext(over))
	return true
}

func subscribed(names []string, name string) bool {
	for _, n := range names {
		if n == "*" || n == name {
			return true
		}
	}
	return false
}

// EventName is the event's arm: "reply_end", "text_block_delta", ...
func EventName(ev *pb.AgentEvent) string {
	m := ev.ProtoReflect()
	if f := m.WhichOneof(m.Descriptor().Oneofs().ByName("event")); f != nil {
		return string(f.Name())
	}
	return ""
}

// downstream reads items until the outcome; onItem answers the items the hook waits on.
func (i *Invocation) downstream(onItem func(*pb.DownstreamItem) *pb.ItemVerdict) (*pb.DownstreamOutcome, error) {
	for {
		r, err := i.recv()
		if err != nil {
			return nil, err
		}
		switch m := r.Message.(type) {
		case *pb.InterceptRequest_Item:
			if v := onItem(m.Item); v != nil {
				i.mu.Lock()
				v.Final = i.passing
				i.mu.Unlock()
				if v.Final {
					i.finish(&pb.InterceptResponse{Message: &pb.InterceptResponse_Verdict{Verdict: v}})
					return nil, nil // the agent sends nothing more for this invocation
				}
				_ = i.answer(&pb.InterceptResponse{Message: &pb.InterceptResponse_Verdict{Verdict: v}})
			}
		case *pb.InterceptRequest_Outcome:
			if e := m.Outcome.GetError(); e != nil {
				return m.Outcome, &DownstreamError{e}
			}
			return m.Outcome, nil
		}
	}
}

func (i *Invocation) eventNext() EventNext {
	return func(over *pb.CallNext, onItem func(*pb.AgentEvent) bool) error {
		if !i.startDownstream(over) {
			return nil
		}
		_, err := i.downstream(func(item *pb.DownstreamItem) *pb.ItemVerdict {
			ev := item.GetEvent()
			if ev == nil {
				return nil
			}
			drop := onItem != nil && onItem(ev)
			for _, more := range item.MoreEvents {
				if onItem != nil {
					onItem(more)
				}
			}
			if i.observed() || !subscribed(i.spec.Subscriptions, EventName(ev)) {
				return nil
			}
			return &pb.ItemVerdict{Drop: drop}
		})
		return err
	}
}

// run drives the hook to its end and sends the closing done unless the agent expects none.
func (s *service) run(i *Invocation) {
	var (
		result *pb.HookDone
		err    error
	)
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("the hook panicked: %v", p)
			}
		}()
		result, err = s.dispatch(i)
	}()
	if errors.Is(err, errCancelled) || errors.Is(err, ErrEnded) {
		return
	}
	var down *DownstreamError
	switch {
	case errors.As(err, &down):
		result = &pb.HookDone{}
	case err != nil:
		result = &pb.HookDone{Result: &pb.HookDone_Error{Error: replyError(err)}}
	case result == nil:
		result = &pb.HookDone{}
	}
	i.finish(&pb.InterceptResponse{Message: &pb.InterceptResponse_Done{Done: result}})
}

func (s *service) dispatch(i *Invocation) (*pb.HookDone, error) {
	switch args := i.Kwargs.(type) {
	case *pb.HookInvocation_Reply:
		if h, ok := s.mw.(OnReply); ok {
			return nil, h.OnReply(i, args.Reply, i.eventNext())
		}
	case *pb.HookInvocation_Reasoning:
		if h, ok := s.mw.(OnReasoning); ok {
			return nil, h.OnReasoning(i, args.Reasoning, i.eventNext())
		}
	case *pb.HookInvocation_Acting:
		if h, ok := s.mw.(OnActing); ok {
			return nil, h.OnActing(i, args.Acting, i.eventNext())
		}
	case *pb.HookInvocation_ModelCall:
		if h, ok := s.mw.(OnModelCall); ok {
			return s.modelCall(i, h, args.ModelCall)
		}
	case *pb.HookInvocation_CheckPermission:
		if h, ok := s.mw.(OnCheckPermission); ok {
			return s.permission(i, h, args.CheckPermission)
		}
	case *pb.HookInvocation_CompressContext:
		if h, ok := s.mw.(OnCompressContext); ok {
			return nil, h.OnCompressContext(i, args.CompressContext, func() error {
				if !i.startDownstream(nil) {
					return nil
				}
				_, err := i.downstream(func(*pb.DownstreamItem) *pb.ItemVerdict { return nil })
				return err
			})
		}
	}
	return nil, &Error{Reason: "HOOK_NOT_SERVED", Message: fmt.Sprintf("%s is not served", i.Hook)}
}

func (s *service) modelCall(i *Invocation, h OnModelCall, args *pb.ModelCallArgs) (*pb.HookDone, error) {
	var downstream *pb.ModelResponse
	resp, err := h.OnModelCall(i, args, func(over *pb.ModelCallOverrides, onChunk func(*pb.ModelChunk)) (*pb.ModelResponse, error) {
		var next *pb.CallNext
		if over != nil {
			next = &pb.CallNext{Overrides: &pb.CallNext_ModelCall{ModelCall: over}}
		}
		if !i.startDownstream(next) {
			return nil, nil
		}
		outcome, err := i.downstream(func(item *pb.DownstreamItem) *pb.ItemVerdict {
			if c := item.GetChunk(); c != nil && onChunk != nil {
				onChunk(c)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if outcome.GetStreamStart() != nil {
			if _, err := i.downstream(func(item *pb.DownstreamItem) *pb.ItemVerdict {
				if c := item.GetChunk(); c != nil && onChunk != nil {
					onChunk(c)
				}
				return nil
			}); err != nil {
				return nil, err
			}
			return nil, nil
		}
		downstream = outcome.GetModelResponse()
		return downstream, nil
	})
	if err != nil || resp == nil || resp == downstream {
		return nil, err
	}
	return &pb.HookDone{Result: &pb.HookDone_ModelResponse{ModelResponse: resp}}, nil
}

func (s *service) permission(i *Invocation, h OnCheckPermission, args *pb.CheckPermissionArgs) (*pb.HookDone, error) {
	var downstream *pb.PermissionDecision
	decision, err := h.OnCheckPermission(i, args, func() (*pb.PermissionDecision, error) {
		if !i.startDownstream(nil) {
			return nil, nil
		}
		outcome, err := i.downstream(func(*pb.DownstreamItem) *pb.ItemVerdict { return nil })
		if err != nil {
			return nil, err
		}
		downstream = outcome.GetPermission()
		return downstream, nil
	})
	if err != nil || decision == nil || decision == downstream {
		return nil, err
	}
	return &pb.HookDone{Result: &pb.HookDone_Permission{Permission: decision}}, nil
}

// Intercept serves one agent stream: each invocation in a goroutine of its own, its
// messages routed by id (ids belong to this stream).
func (s *service) Intercept(st pb.MiddlewareService_InterceptServer) error {
	s.streams.Add(1)
	defer s.streams.Done()
	ctx, cancelAll := context.WithCancel(st.Context())
	var sendMu sync.Mutex
	send := func(r *pb.InterceptResponse) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		if ctx.Err() != nil {
			return ctx.Err() // the stream ended: a hook still running sends nothing
		}
		return st.Send(r)
	}
	defer func() {
		sendMu.Lock()
		cancelAll()
		sendMu.Unlock()
	}()
	type received struct {
		r   *pb.InterceptRequest
		err error
	}
	reqs := make(chan received)
	go func() {
		for {
			r, err := st.Recv()
			select {
			case reqs <- received{r, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	invs := map[string]*Invocation{}
	over := make(chan string, 64)
	draining := s.draining
	for {
		select {
		case got := <-reqs:
			if got.err != nil {
				cancelAll()
				if errors.Is(got.err, io.EOF) {
					return nil
				}
				return got.err
			}
			s.route(ctx, got.r, invs, send, over)
		case id := <-over:
			if inv, ok := invs[id]; ok && inv.done() {
				delete(invs, id)
			}
		case <-draining:
			draining = nil
		case <-s.graceOver:
			return nil
		}
		if draining == nil && len(invs) == 0 {
			return nil
		}
	}
}

func (i *Invocation) done() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.finished || i.ended
}

func (s *service) route(ctx context.Context, r *pb.InterceptRequest, invs map[string]*Invocation,
	send func(*pb.InterceptResponse) error, over chan string) {
	id := r.InvocationId
	if hi := r.GetInvocation(); hi != nil {
		if len(invs) >= MaxInvocations {
			e := &pb.ReplyError{Reason: "TOO_MANY_INVOCATIONS", Message: "too many invocations at once"}
			_ = send(&pb.InterceptResponse{InvocationId: id, Message: &pb.InterceptResponse_Done{Done: &pb.HookDone{Result: &pb.HookDone_Error{Error: e}}}})
			return
		}
		spec := &pb.HookSpec{Mode: pb.HookMode_HOOK_MODE_INTERCEPT}
		for _, h := range s.desc.Hooks {
			if h.Hook == hi.Hook {
				spec = h
			}
		}
		ictx, cancel := context.WithCancel(ctx)
		inv := &Invocation{HookInvocation: hi, ID: id, ctx: ictx, cancel: cancel, send: send,
			spec: spec, box: newMailbox(), heard: time.Now(), state: hi.State}
		invs[id] = inv
		go func() {
			s.run(inv)
			cancel()
			select {
			case over <- id:
			case <-ctx.Done():
			}
		}()
		return
	}
	inv, ok := invs[id]
	if !ok {
		return // an invocation this stream does not know (or ended): ignored
	}
	if r.GetCancel() != nil {
		inv.mu.Lock()
		inv.ended = true
		inv.mu.Unlock()
		inv.cancel()
		delete(invs, id)
		return
	}
	inv.box.put(r)
}

// mailbox is an unbounded queue: the stream's reader never waits for a slow hook.
type mailbox struct {
	mu     sync.Mutex
	items  []*pb.InterceptRequest
	signal chan struct{}
}

func newMailbox() *mailbox { return &mailbox{signal: make(chan struct{}, 1)} }

func (m *mailbox) put(r *pb.InterceptRequest) {
	m.mu.Lock()
	m.items = append(m.items, r)
	m.mu.Unlock()
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

func (m *mailbox) get(ctx context.Context) (*pb.InterceptRequest, bool) {
	for {
		m.mu.Lock()
		if len(m.items) > 0 {
			r := m.items[0]
			m.items = m.items[1:]
			m.mu.Unlock()
			return r, true
		}
		m.mu.Unlock()
		select {
		case <-m.signal:
		case <-ctx.Done():
			return nil, false
		}
	}
}
