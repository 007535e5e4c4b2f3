"""mockcloud: a loopback stand-in for AWS EC2 + STS (see docs/mock-cloud.md)."""
