"""Generated protobuf and gRPC code for hookmesh.v1 (`make proto`); never edited by hand."""
