"""Inference server: FastAPI app, policy runtime, micro-batching and metrics.

The wire protocol it speaks lives in the `mqe_client` package, shared with the robot client.
"""
