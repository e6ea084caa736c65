// The conformance middleware of docs/remote-protocol.md § Conformance on the Go SDK: the
// reference `hookmesh conformance --sidecar ADDR` checks.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"strings"

	pb "github.com/hookmesh/hookmesh/clients/go/hookmeshv1"
	"github.com/hookmesh/hookmesh/clients/go/sidecar"
	"google.golang.org/protobuf/types/known/structpb"
)

// observe serves the observing variant (docs/remote-protocol.md § Conformance): every onion
// hook in HOOK_MODE_OBSERVE; read once the flags are parsed (sidecar.Main parses them).
var observe = flag.Bool("observe", false, "describe every onion hook in HOOK_MODE_OBSERVE")

type conformance struct{}

func (conformance) Key() string        { return "conformance" }
func (conformance) NeedsContext() bool { return true }
func (conformance) Hooks() map[pb.Hook]sidecar.HookOptions {
	hooks := map[pb.Hook]sidecar.HookOptions{
		pb.Hook_HOOK_ON_REPLY:            {ReadOnly: []string{"*"}},
		pb.Hook_HOOK_ON_REASONING:        {Subscriptions: []string{"*"}},
		pb.Hook_HOOK_ON_MODEL_CALL:       {Subscriptions: []string{"chunk"}},
		pb.Hook_HOOK_ON_ACTING:           {Subscriptions: []string{"*"}},
		pb.Hook_HOOK_ON_COMPRESS_CONTEXT: {Mode: pb.HookMode_HOOK_MODE_PRE_ONLY},
	}
	if *observe {
		hooks[pb.Hook_HOOK_ON_CHECK_PERMISSION] = sidecar.HookOptions{}
		for hook, options := range hooks {
			options.Mode = pb.HookMode_HOOK_MODE_OBSERVE
			hooks[hook] = options
		}
	}
	return hooks
}

func text(m *pb.Message) string {
	if f := m.GetFlat(); f != nil {
		return f.Content
	}
	var parts []string
	for _, b := range m.GetAgentic().GetBlocks() {
		parts = append(parts, b.GetText().GetText())
	}
	return strings.Join(parts, "")
}

// marker is the word after "conformance:" in the last context message.
func marker(inv *sidecar.Invocation) string {
	if n := len(inv.Context); n > 0 {
		if t := text(inv.Context[n-1]); strings.HasPrefix(t, "conformance:") {
			return strings.TrimPrefix(t, "conformance:")
		}
	}
	return ""
}

func failure(hook string) error {
	return &sidecar.Error{Reason: "CONFORMANCE_ERROR", Message: "conformance error",
		Metadata: map[string]string{"hook": hook}}
}

func emit(inv *sidecar.Invocation, name string) {
	_ = inv.Emit(&pb.AgentEvent{Event: &pb.AgentEvent_Custom{Custom: &pb.CustomEvent{Name: name}}})
}

func pre(inv *sidecar.Invocation, hook, word string) error {
	switch word {
	case "sleep":
		<-inv.Ctx().Done()
		return inv.Ctx().Err()
	case "error":
		return failure(hook)
	case "state":
		state := inv.State()
		count, _ := state["count"].(float64)
		if _, ok := state["count"]; !ok {
			count = 0
		}
		state["count"] = count + 1
		return inv.SetState(state)
	case "forget":
		return inv.Mutate(&pb.StateMutation{RemoveMessageIds: []string{inv.Context[0].Id}})
	case "emit":
		emit(inv, "conformance.pre")
	}
	return nil
}

func events(inv *sidecar.Invocation, hook string, override *pb.CallNext, next sidecar.EventNext) error {
	word := marker(inv)
	if err := pre(inv, hook, word); err != nil {
		return err
	}
	var over *pb.CallNext
	switch word {
	case "retry":
		var failed *sidecar.DownstreamError
		if err := next(nil, nil); !errors.As(err, &failed) {
			return err
		}
		return next(nil, nil) // the downstream failed once: run it again
	case "short-circuit":
		emit(inv, "conformance.short_circuit")
		return nil
	case "stop":
		return next(nil, func(*pb.AgentEvent) bool {
			emit(inv, "conformance.stopped")
			inv.End(nil) // next returns ErrEnded: the rest of the downstream is dropped
			return false
		})
	case "final-verdict":
		return next(nil, func(*pb.AgentEvent) bool {
			inv.PassRest() // this item's verdict is final: the rest passes unseen
			return false
		})
	case "override":
		over = override
	case "final":
		if hook != "on_reply" {
			over = &pb.CallNext{Final: true}
		}
	}
	if err := next(over, func(*pb.AgentEvent) bool { return word == "drop" }); err != nil {
		return err
	}
	if word == "error-after" {
		return failure(hook)
	}
	if word == "emit" {
		emit(inv, "conformance.post")
	}
	return nil
}

func (conformance) OnReply(inv *sidecar.Invocation, _ *pb.ReplyArgs, next sidecar.EventNext) error {
	return events(inv, "on_reply", nil, next)
}

func (conformance) OnReasoning(inv *sidecar.Invocation, _ *pb.ReasoningArgs, next sidecar.EventNext) error {
	none := "none"
	over := &pb.CallNext{Overrides: &pb.CallNext_Reasoning{Reasoning: &pb.ReasoningOverrides{ToolChoice: &none}}}
	return events(inv, "on_reasoning", over, next)
}

func (conformance) OnActing(inv *sidecar.Invocation, _ *pb.ActingArgs, next sidecar.EventNext) error {
	args := `{"text": "overridden"}`
	over := &pb.CallNext{Overrides: &pb.CallNext_Acting{Acting: &pb.ActingOverrides{Arguments: &args}}}
	return events(inv, "on_acting", over, next)
}

func (conformance) OnModelCall(inv *sidecar.Invocation, _ *pb.ModelCallArgs, next sidecar.ModelNext) (*pb.ModelResponse, error) {
	word := marker(inv)
	if err := pre(inv, "on_model_call", word); err != nil {
		return nil, err
	}
	var over *pb.ModelCallOverrides
	switch word {
	case "short-circuit":
		emit(inv, "conformance.short_circuit")
		return &pb.ModelResponse{Message: assistant(inv.Kind, "short-circuited")}, nil
	case "override":
		none := "none"
		over = &pb.ModelCallOverrides{ToolChoice: &none}
	case "model":
		fast := "fast"
		over = &pb.ModelCallOverrides{Model: &fast}
	case "stop":
		return next(nil, func(*pb.ModelChunk) { inv.End(nil) }) // a plain done: the stream ends
	}
	resp, err := next(over, nil)
	if err != nil {
		return nil, err
	}
	if word == "error-after" {
		return nil, failure("on_model_call")
	}
	if word == "emit" {
		emit(inv, "conformance.post")
	}
	return resp, nil
}

func assistant(kind pb.MessageKind, t string) *pb.Message {
	if kind == pb.MessageKind_MESSAGE_KIND_AGENTIC {
		block := &pb.ContentBlock{Block: &pb.ContentBlock_Text{Text: &pb.TextBlock{Text: t}}}
		return &pb.Message{Kind: &pb.Message_Agentic{Agentic: &pb.AgenticMessage{Role: pb.Role_ROLE_ASSISTANT, Blocks: []*pb.ContentBlock{block}}}}
	}
	return &pb.Message{Kind: &pb.Message_Flat{Flat: &pb.FlatMessage{Role: pb.Role_ROLE_ASSISTANT, Content: t}}}
}

func (conformance) OnCheckPermission(inv *sidecar.Invocation, _ *pb.CheckPermissionArgs, next sidecar.PermissionNext) (*pb.PermissionDecision, error) {
	word := marker(inv)
	if err := pre(inv, "on_check_permission", word); err != nil {
		return nil, err
	}
	if word == "short-circuit" {
		emit(inv, "conformance.short_circuit")
		return &pb.PermissionDecision{Behavior: pb.PermissionBehavior_PERMISSION_BEHAVIOR_DENY, Reason: "short-circuited"}, nil
	}
	decision, err := next()
	if err == nil && word == "error-after" {
		return nil, failure("on_check_permission")
	}
	if err == nil && word == "emit" {
		emit(inv, "conformance.post")
	}
	return decision, err
}

func (conformance) OnCompressContext(inv *sidecar.Invocation, _ *pb.CompressContextArgs, next func() error) error {
	word := marker(inv)
	if err := pre(inv, "on_compress_context", word); err != nil {
		return err
	}
	if word == "short-circuit" {
		return nil
	}
	return next()
}

func (conformance) TransformSystemPrompt(_ context.Context, req *pb.TransformSystemPromptRequest) (string, *pb.StateMutation, error) {
	return req.Prompt + " [conformance]", nil, nil
}

func (conformance) AfterAgent(_ context.Context, req *pb.AfterAgentRequest) (*pb.StateMutation, error) {
	if req.FinalMessage == nil {
		return nil, &sidecar.Error{Reason: "INVALID_ARGUMENT", Message: "no final message"}
	}
	state := req.State.AsMap()
	state["after"] = true
	s, err := structpb.NewStruct(state)
	return &pb.StateMutation{State: s}, err
}

func (conformance) Tools() []sidecar.Tool {
	params, _ := structpb.NewStruct(map[string]interface{}{"type": "object", "required": []interface{}{"text"},
		"properties": map[string]interface{}{"text": map[string]interface{}{"type": "string"}}})
	spec := &pb.ToolSpec{Name: "conformance_echo", Description: "Stream the text back.", Parameters: params, ReadOnly: true}
	return []sidecar.Tool{{Spec: spec, Run: func(_ context.Context, call *sidecar.ToolCall) error {
		var args struct{ Text *string }
		if err := json.Unmarshal([]byte(call.Arguments), &args); err != nil || args.Text == nil {
			return sidecar.InvalidArguments("arguments: {\"text\": string} is required")
		}
		if *args.Text == "fail" {
			return &sidecar.Error{Reason: "CONFORMANCE_ERROR", Message: "asked to fail"}
		}
		return call.Text(*args.Text)
	}}}
}

func main() { sidecar.Main(conformance{}) }
