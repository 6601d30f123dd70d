"""Runs under the openpi-client environment (.venv-openpi), never under the project's: drives a
server through the real `openpi_client.websocket_client_policy.WebsocketClientPolicy`.

    python openpi_client_script.py PORT INPUTS.npz OUTPUTS.npz [API_KEY]

INPUTS holds `goal` and `frames` (N, H, W, 3) uint8; OUTPUTS gets `actions` (N, 1, A), the
metadata's default policy, and the text of the errors the server answered to bad messages.
"""

import json
import sys

import numpy as np
from openpi_client import websocket_client_policy


def main() -> None:
    port, inputs, outputs = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    api_key = sys.argv[4] if len(sys.argv) > 4 else None
    client = websocket_client_policy.WebsocketClientPolicy(host="127.0.0.1", port=port, api_key=api_key)
    data = np.load(inputs)
    metadata = client.get_server_metadata()
    errors = []
    try:  # no goal yet
        client.infer({"observation/image": data["frames"][0]})
    except RuntimeError as e:
        errors.append(str(e))
    actions, distances = [], []
    for i, frame in enumerate(data["frames"]):
        observation = {"observation/image": frame, "observation/state": np.zeros(7),  # openpi's usual extras
                       "prompt": "put the spoon in the pot"}
        if i == 0:
            observation["goal/image"] = data["goal"]
        answer = client.infer(observation)
        actions.append(answer["actions"])
        distances.append(answer["distance"])
    try:  # a float image
        client.infer({"observation/image": data["frames"][0].astype(np.float32)})
    except RuntimeError as e:
        errors.append(str(e))
    after_error = client.infer({"observation/image": data["frames"][0]})["actions"]
    np.savez(outputs, actions=np.stack(actions), distances=np.array(distances, np.float64),
             after_error=after_error, metadata=json.dumps(metadata), errors=json.dumps(errors))


if __name__ == "__main__":
    main()
