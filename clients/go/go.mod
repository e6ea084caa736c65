module github.com/hookmesh/hookmesh/clients/go

// The oldest versions the SDK is built and tested with (Debian bookworm's packages, built in
// GOPATH mode by tests/go_sidecar.py); newer ones work as usual with a module proxy.
go 1.19

require (
	github.com/golang/protobuf v1.5.2
	google.golang.org/genproto v0.0.0-20221024183307-1bc688fe9f3e
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
