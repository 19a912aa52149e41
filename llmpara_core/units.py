"""Unit constants. Internally everything is SI (bytes, FLOPs, seconds, joules, watts).

GB means 10**9 bytes and GiB means 2**30 bytes; both are spelled out wherever shown.
1 MAC (multiply-accumulate) = 2 FLOPs.
"""

BITS_PER_BYTE = 8.0
FLOPS_PER_MAC = 2.0

BYTES_PER_KB = 1e3
BYTES_PER_MB = 1e6
BYTES_PER_GB = 1e9
BYTES_PER_TB = 1e12
BYTES_PER_MIB = float(2**20)
BYTES_PER_GIB = float(2**30)

FLOPS_PER_GFLOP = 1e9
FLOPS_PER_TFLOP = 1e12
FLOPS_PER_EFLOP = 1e18

S_PER_MS = 1e-3
S_PER_US = 1e-6
S_PER_NS = 1e-9
S_PER_HOUR = 3600.0
HOURS_PER_YEAR = 365.25 * 24.0

J_PER_PJ = 1e-12
J_PER_KWH = 3.6e6
G_PER_KG = 1e3

TOKENS_PER_MILLION = 1e6

# Bounds for validated sizes: anything larger is not a real model or workload.
MAX_SIZE = 10**9


def bits_to_bytes(count: float, bits: float) -> float:
    """Bytes taken by ``count`` elements of ``bits`` bits each (fractional bits allowed)."""
    return count * bits / BITS_PER_BYTE
