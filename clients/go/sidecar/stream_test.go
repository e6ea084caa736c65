package sidecar

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	pb "github.com/hookmesh/hookmesh/clients/go/hookmeshv1"
)

// recorded is an invocation whose answers are kept instead of sent.
func recorded(mode pb.HookMode) (*Invocation, func() []string) {
	var mu sync.Mutex
	var arms []string
	send := func(r *pb.InterceptResponse) error {
		mu.Lock()
		defer mu.Unlock()
		switch r.Message.(type) {
		case *pb.InterceptResponse_CallNext:
			arms = append(arms, "call_next")
		case *pb.InterceptResponse_Done:
			arms = append(arms, "done")
		case *pb.InterceptResponse_Verdict:
			switch v := r.GetVerdict(); {
			case v.Final && v.Drop:
				arms = append(arms, "final dropping verdict")
			case v.Final:
				arms = append(arms, "final verdict")
			default:
				arms = append(arms, "verdict")
			}
		case *pb.InterceptResponse_Emit:
			arms = append(arms, "emit")
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	inv := &Invocation{HookInvocation: &pb.HookInvocation{}, ID: "1", ctx: ctx, cancel: cancel,
		send: send, spec: &pb.HookSpec{Mode: mode, Subscriptions: []string{"*"}}, box: newMailbox(),
		heard: time.Now()}
	return inv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), arms...)
	}
}

func item() *pb.InterceptRequest {
	ev := &pb.AgentEvent{Event: &pb.AgentEvent_TextBlockDelta{TextBlockDelta: &pb.TextBlockDeltaEvent{Delta: "x"}}}
	return &pb.InterceptRequest{Message: &pb.InterceptRequest_Item{Item: &pb.DownstreamItem{Item: &pb.DownstreamItem_Event{Event: ev}}}}
}

// outcome is the downstream's end: a next still reading items returns at it.
func outcome() *pb.InterceptRequest {
	return &pb.InterceptRequest{Message: &pb.InterceptRequest_Outcome{Outcome: &pb.DownstreamOutcome{}}}
}

// End from another goroutine (a deadline of the hook's own) wakes the blocked next with
// ErrEnded; nothing is sent after the done, not even for what the agent sent meanwhile.
func TestEndFromAnotherGoroutineEndsABlockedNext(t *testing.T) {
	inv, sent := recorded(pb.HookMode_HOOK_MODE_INTERCEPT)
	returned := make(chan error, 1)
	go func() { returned <- inv.eventNext()(nil, func(*pb.AgentEvent) bool { return false }) }()
	time.AfterFunc(50*time.Millisecond, func() { inv.End(nil) })
	select {
	case err := <-returned:
		if !errors.Is(err, ErrEnded) {
			t.Fatalf("next returned %v, want ErrEnded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("next still blocked 5 s after End")
	}
	inv.box.put(item())
	_ = inv.Emit(&pb.AgentEvent{})
	inv.finish(&pb.InterceptResponse{Message: &pb.InterceptResponse_Done{Done: &pb.HookDone{}}})
	if got := sent(); len(got) != 2 || got[0] != "call_next" || got[1] != "done" {
		t.Fatalf("sent %v, want [call_next done]", got)
	}
}

// End inside onItem answers that item with the done instead of a verdict.
func TestEndInOnItemReplacesTheVerdict(t *testing.T) {
	inv, sent := recorded(pb.HookMode_HOOK_MODE_INTERCEPT)
	inv.box.put(item())
	inv.box.put(item())
	err := inv.eventNext()(nil, func(*pb.AgentEvent) bool { inv.End(nil); return false })
	if !errors.Is(err, ErrEnded) {
		t.Fatalf("next returned %v, want ErrEnded", err)
	}
	if got := sent(); len(got) != 2 || got[1] != "done" {
		t.Fatalf("sent %v, want [call_next done]", got)
	}
}

// An observed invocation sends nothing, End included.
func TestEndSendsNothingWhenObserved(t *testing.T) {
	inv, sent := recorded(pb.HookMode_HOOK_MODE_OBSERVE)
	inv.End(nil)
	_ = inv.Mutate(&pb.StateMutation{})
	if got := sent(); len(got) != 0 {
		t.Fatalf("sent %v while observed", got)
	}
}

// PassRest in onItem answers that item with verdict {final: true} (kept) and next returns
// nil at once: the items still queued are not read, and nothing is sent after it.
func TestPassRestInOnItemSendsAFinalVerdict(t *testing.T) {
	inv, sent := recorded(pb.HookMode_HOOK_MODE_INTERCEPT)
	inv.box.put(item())
	inv.box.put(item())
	inv.box.put(outcome())
	seen := 0
	err := inv.eventNext()(nil, func(*pb.AgentEvent) bool { seen++; inv.PassRest(); return false })
	if err != nil {
		t.Fatalf("next returned %v, want nil", err)
	}
	if seen != 1 {
		t.Fatalf("onItem ran %d times, want 1", seen)
	}
	_ = inv.Emit(&pb.AgentEvent{})
	inv.finish(&pb.InterceptResponse{Message: &pb.InterceptResponse_Done{Done: &pb.HookDone{}}})
	if got := sent(); len(got) != 2 || got[0] != "call_next" || got[1] != "final verdict" {
		t.Fatalf("sent %v, want [call_next, final verdict]", got)
	}
}

// PassRest with onItem dropping the item: the final verdict drops it.
func TestPassRestKeepsTheDrop(t *testing.T) {
	inv, sent := recorded(pb.HookMode_HOOK_MODE_INTERCEPT)
	inv.box.put(item())
	inv.box.put(outcome())
	if err := inv.eventNext()(nil, func(*pb.AgentEvent) bool { inv.PassRest(); return true }); err != nil {
		t.Fatalf("next returned %v, want nil", err)
	}
	if got := sent(); len(got) != 2 || got[1] != "final dropping verdict" {
		t.Fatalf("sent %v, want [call_next, final dropping verdict]", got)
	}
}

// Without PassRest each item gets a plain verdict: the final one is PassRest's doing.
func TestVerdictsAreNotFinalWithoutPassRest(t *testing.T) {
	inv, sent := recorded(pb.HookMode_HOOK_MODE_INTERCEPT)
	inv.box.put(item())
	inv.box.put(outcome())
	if err := inv.eventNext()(nil, func(*pb.AgentEvent) bool { return false }); err != nil {
		t.Fatalf("next returned %v, want nil", err)
	}
	if got := sent(); len(got) != 2 || got[1] != "verdict" {
		t.Fatalf("sent %v, want [call_next, verdict]", got)
	}
}

// Observed, PassRest sends nothing.
func TestPassRestSendsNothingWhenObserved(t *testing.T) {
	inv, sent := recorded(pb.HookMode_HOOK_MODE_OBSERVE)
	inv.box.put(item())
	inv.box.put(outcome())
	_ = inv.eventNext()(nil, func(*pb.AgentEvent) bool { inv.PassRest(); return false })
	if got := sent(); len(got) != 0 {
		t.Fatalf("sent %v while observed", got)
	}
}
