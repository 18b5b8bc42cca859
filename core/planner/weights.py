"""Weight bytes: from a checkpoint's safetensors headers when a local folder has them, else from
the layer map's parameter count.

A safetensors file starts with an 8-byte little-endian header length, then a JSON header mapping
each tensor name to `{dtype, shape, data_offsets}`; reading that is enough to size the weights
without torch and without touching the data. Sharded checkpoints list their files in
`model.safetensors.index.json` (`weight_map`).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from math import prod
from pathlib import Path

from bringup.core.errors import UserError

# safetensors dtype tag -> bytes per element
_ST_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F4": 0.5,
}
_FLOAT = {"F64", "F32", "F16", "BF16"}
_MAX_HEADER = 100 * 1024 * 1024  # the format's own limit


@dataclass(frozen=True)
class CheckpointWeights:
    files: tuple[str, ...]
    tensors: int
    params: int  # elements of all tensors
    stored_bytes: int  # bytes as stored on disk (data only)
    float_params: int  # elements of floating-point tensors (these take the load dtype)
    other_bytes: int  # bytes of non-float (quantized, integer) tensors, loaded as stored

    def bytes_as(self, element_bytes: int | None) -> int:
        """Bytes once loaded with float tensors cast to `element_bytes` (None: as stored)."""
        if element_bytes is None:
            return self.stored_bytes
        return self.float_params * element_bytes + self.other_bytes


def read_safetensors_header(path: Path) -> dict:
    """The JSON header of one .safetensors file (tensor name -> dtype, shape, data_offsets)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(8)
            if len(raw) != 8:
                raise UserError(f"{path} is too short to be a safetensors file; re-download it")
            (length,) = struct.unpack("<Q", raw)
            if length > _MAX_HEADER:
                raise UserError(f"{path} claims a {length}-byte header; the file is damaged, re-download it")
            header = json.loads(fh.read(length))
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read the safetensors header of {path}: {err}; check the file") from err
    if not isinstance(header, dict):
        raise UserError(f"{path} has no tensor table in its header; re-download it")
    header.pop("__metadata__", None)
    return header


def _shard_files(folder: Path) -> list[Path]:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text()).get("weight_map", {})
        except (OSError, ValueError) as err:
            raise UserError(f"cannot read {index}: {err}; check the file") from err
        names = sorted(set(weight_map.values()))
        missing = [n for n in names if not (folder / n).is_file()]
        if missing:
            raise UserError(f"{index.name} lists {len(missing)} shard(s) missing from {folder} (e.g. {missing[0]}); finish the download")
        return [folder / n for n in names]
    return sorted(folder.glob("*.safetensors"))


def checkpoint_weights(folder: str | Path | None) -> CheckpointWeights | None:
    """Size the checkpoint in `folder` from its headers; None when it has no safetensors files."""
    if folder is None:
        return None
    folder = Path(folder)
    if folder.is_file():
        folder = folder.parent
    files = _shard_files(folder) if folder.is_dir() else []
    if not files:
        return None
    tensors = params = stored = float_params = other = 0
    for path in files:
        for name, info in read_safetensors_header(path).items():
            dtype = info.get("dtype")
            if dtype not in _ST_BYTES:
                raise UserError(f"{path.name}: tensor {name} has unknown dtype {dtype!r}")
            numel = prod(info.get("shape", []))
            start, end = info.get("data_offsets", (0, 0))
            tensors += 1
            params += numel
            stored += end - start
            if dtype in _FLOAT:
                float_params += numel
            else:
                other += end - start
    return CheckpointWeights(tuple(p.name for p in files), tensors, params, stored, float_params, other)
