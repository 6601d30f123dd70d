"""Inference server: FastAPI app, policy runtime and the wire protocol (`server.protocol`).

Importing this package is light: only `server.protocol` is meant for clients, and it needs
numpy and msgpack alone.
"""
