"""mqe-deploy's wire package: protocol, image resize, policy client and mock server (numpy + msgpack)."""
