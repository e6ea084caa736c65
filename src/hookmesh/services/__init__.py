"""gRPC services of the suite and what they share."""
