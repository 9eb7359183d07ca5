"""LitServe serving one of the demo models (make-demo-models' mlp or cnn,
TorchScript) with its batching, as LitServe's documentation sets a batched
CPU model up. A request is {"x": one row as nested JSON lists}.

  litserve_server.py MODEL_PT PORT WORKERS MAX_BATCH BATCH_TIMEOUT_S
"""
import sys

import litserve as ls
import torch


class DemoAPI(ls.LitAPI):
    def setup(self, device):
        torch.set_num_threads(1)  # one LibTorch thread per worker, as infergate's CPU workers
        self.model = torch.jit.load(sys.argv[1]).eval()

    def decode_request(self, request):
        return torch.tensor(request["x"], dtype=torch.float32)

    def batch(self, inputs):
        return torch.stack(inputs)

    def predict(self, x):
        with torch.inference_mode():
            return self.model(x)

    def unbatch(self, output):
        return list(output)

    def encode_response(self, output):
        return {"logits": output.tolist()}


if __name__ == "__main__":
    model, port, workers, max_batch, timeout = sys.argv[1:6]
    api = DemoAPI(max_batch_size=int(max_batch), batch_timeout=float(timeout))
    server = ls.LitServer(api, accelerator="cpu", workers_per_device=int(workers), fast_queue=True)
    server.run(host="127.0.0.1", port=int(port), generate_client_file=False, log_level="warning")
