#!/usr/bin/env python3
"""Writes a TorchServe model store as KServe mounts it, for the benchmark:

  STORE/config/config.properties        model_snapshot: clf, batchSize 8, maxBatchDelay 5
  STORE/model-store/clf.mar             image_classifier around a small CNN
  IMAGE                                 a 640x480 JPEG photo-like test image

  make_torchserve_store.py STORE IMAGE

The archive is written as torch-model-archiver writes it (a deflated zip
with MAR-INF/MANIFEST.json), the model saved with torch.jit.script. Uses
Debian's python3-torch and python3-pil.
"""
import io
import json
import os
import random
import sys
import zipfile

import torch
from PIL import Image, ImageDraw, ImageFilter


def main():
    store, image_path = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(store, "config"), exist_ok=True)
    os.makedirs(os.path.join(store, "model-store"), exist_ok=True)
    torch.manual_seed(3)
    # A small ImageNet-shaped classifier: 224x224 RGB in, 1000 classes out.
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 7, stride=4, padding=3), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 1000)).eval()
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(model), buf)
    manifest = {"createdOn": "26/11/2026 00:00:00", "runtime": "python",
                "model": {"modelName": "clf", "serializedFile": "clf.pt", "handler": "image_classifier",
                          "modelVersion": "1.0"},
                "archiverVersion": "0.12.0"}
    labels = {str(i): ["n%08d" % i, "class %d" % i] for i in range(1000)}
    with zipfile.ZipFile(os.path.join(store, "model-store", "clf.mar"), "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("MAR-INF/MANIFEST.json", json.dumps(manifest, indent=2))
        z.writestr("clf.pt", buf.getvalue())
        z.writestr("index_to_name.json", json.dumps(labels))
    snapshot = {"name": "startup.cfg", "modelCount": 1, "models": {"clf": {"1.0": {
        "defaultVersion": True, "marName": "clf.mar", "minWorkers": 1, "maxWorkers": 1, "batchSize": 8,
        "maxBatchDelay": 5, "responseTimeout": 120}}}}
    with open(os.path.join(store, "config", "config.properties"), "w") as f:
        f.write("load_models=all\nmodel_snapshot=%s\n" % json.dumps(snapshot))
    rng = random.Random(1)
    img = Image.new("RGB", (640, 480), (120, 150, 200))
    draw = ImageDraw.Draw(img)
    for _ in range(200):
        x, y = rng.randrange(640), rng.randrange(480)
        draw.ellipse([x, y, x + rng.randrange(8, 90), y + rng.randrange(8, 90)],
                     fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    img.filter(ImageFilter.GaussianBlur(1.5)).save(image_path, "JPEG", quality=90)


if __name__ == "__main__":
    main()
