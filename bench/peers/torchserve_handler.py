"""TorchServe handler for the demo models (make-demo-models' mlp and cnn),
as a TorchServe user writes one on base_handler: BaseHandler loads the
TorchScript file and runs it; this adds only the request decoding (one row
per request, {"x": the row as nested JSON lists}, the values the other
servers get) and one answer per request of the batch TorchServe gathered."""
import json

import torch
from ts.torch_handler.base_handler import BaseHandler


class DemoHandler(BaseHandler):
    def initialize(self, context):
        # One LibTorch thread per worker, as infergate's CPU workers run
        # (bench/peers.py starts as many workers as the machine has cores).
        torch.set_num_threads(1)
        super().initialize(context)

    def preprocess(self, data):
        rows = []
        for request in data:
            body = request.get("body") if request.get("body") is not None else request.get("data")
            if isinstance(body, (bytes, bytearray)):
                body = json.loads(body)
            rows.append(body["x"] if isinstance(body, dict) else body)
        return torch.tensor(rows, dtype=torch.float32)

    def postprocess(self, data):
        return [{"logits": row} for row in data.tolist()]
