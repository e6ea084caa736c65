// An audit middleware: one JSON line per reply event on stdout, and a count before reply_end.
package main

import (
	"encoding/json"
	"fmt"

	pb "github.com/hookmesh/hookmesh/clients/go/hookmeshv1"
	"github.com/hookmesh/hookmesh/clients/go/sidecar"
	"google.golang.org/protobuf/types/known/structpb"
)

type audit struct{}

func (audit) Key() string        { return "audit" }
func (audit) NeedsContext() bool { return false }
func (audit) Hooks() map[pb.Hook]sidecar.HookOptions {
	return map[pb.Hook]sidecar.HookOptions{pb.Hook_HOOK_ON_REPLY: {
		Subscriptions: []string{"reply_end"}, ReadOnly: []string{"*"}}}
}

func (audit) OnReply(inv *sidecar.Invocation, _ *pb.ReplyArgs, next sidecar.EventNext) error {
	count := 0
	return next(nil, func(ev *pb.AgentEvent) bool {
		line, _ := json.Marshal(map[string]string{"reply": inv.ReplyId, "user": inv.UserId, "event": sidecar.EventName(ev)})
		fmt.Println(string(line))
		if sidecar.EventName(ev) == "reply_end" {
			report := &pb.CustomEvent{Name: "audit", Value: structpb.NewNumberValue(float64(count))}
			_ = inv.Emit(&pb.AgentEvent{Event: &pb.AgentEvent_Custom{Custom: report}})
		}
		count++
		return false
	})
}

func main() { sidecar.Main(audit{}) }
