"""Datasheet dense peaks of known GPUs (no sparsity), as data: TFLOP/s (TOPS for integers) and GB/s.

Keys: bf16 and f16 with f32 accumulation, f16acc (f16 accumulation), tf32, fp8 (f32 accumulation), int8, int4,
bw (memory bandwidth). None: the GPU has no such tensor-core rate. GeForce parts (RTX 4090, RTX 5090) run
f32 accumulation at half the f16-accumulation rate; data-center parts do not. Sources: NVIDIA product
datasheets and architecture whitepapers (A100, H100, H200, L40S, Ada, Blackwell).
"""

from __future__ import annotations

import re

_A100 = {"bf16": 312, "f16": 312, "f16acc": 312, "tf32": 156, "fp8": None, "int8": 624, "int4": 1248}
_H100_SXM = {"bf16": 989, "f16": 989, "f16acc": 989, "tf32": 495, "fp8": 1979, "int8": 1979, "int4": None}
_H100_PCIE = {"bf16": 756, "f16": 756, "f16acc": 756, "tf32": 378, "fp8": 1513, "int8": 1513, "int4": None}
_NVL = {"bf16": 835, "f16": 835, "f16acc": 835, "tf32": 418, "fp8": 1671, "int8": 1671, "int4": None}

# (pattern on torch.cuda.get_device_name(), label, peaks); the first match wins, so specific names come first.
GPUS = (
    (r"H100.*NVL", "H100 NVL", {**_NVL, "bw": 3900}),
    (r"H100.*PCIe", "H100 PCIe", {**_H100_PCIE, "bw": 2000}),
    (r"H100", "H100 SXM", {**_H100_SXM, "bw": 3350}),
    (r"H200.*NVL", "H200 NVL", {**_NVL, "bw": 4800}),
    (r"H200", "H200 SXM", {**_H100_SXM, "bw": 4800}),
    (r"A100.*PCIE.*40|A100.*40GB.*PCIE", "A100 PCIe 40GB", {**_A100, "bw": 1555}),
    (r"A100.*PCIE", "A100 PCIe 80GB", {**_A100, "bw": 1935}),
    (r"A100.*40GB", "A100 SXM 40GB", {**_A100, "bw": 1555}),
    (r"A100", "A100 SXM 80GB", {**_A100, "bw": 2039}),
    (r"L40S", "L40S", {"bf16": 362, "f16": 362, "f16acc": 362, "tf32": 183, "fp8": 733, "int8": 733, "int4": 733,
                       "bw": 864}),
    (r"RTX 4090", "RTX 4090", {"bf16": 165.2, "f16": 165.2, "f16acc": 330.3, "tf32": 82.6, "fp8": 330.3,
                               "int8": 660.6, "int4": 1321.2, "bw": 1008}),
    (r"RTX 5090", "RTX 5090", {"bf16": 209.5, "f16": 209.5, "f16acc": 419, "tf32": 104.8, "fp8": 419,
                               "int8": 838, "int4": None, "bw": 1792}),
    (r"B200", "B200", {"bf16": 2250, "f16": 2250, "f16acc": 2250, "tf32": 1100, "fp8": 4500, "int8": 4500,
                       "int4": None, "bw": 8000}),
)


def lookup(device_name: str) -> tuple[str, dict] | None:
    """(label, peaks) for a device name such as "NVIDIA H100 80GB HBM3", or None for an unknown GPU."""
    for pattern, label, peaks in GPUS:
        if re.search(pattern, device_name, re.I):
            return label, peaks
    return None
