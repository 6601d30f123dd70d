"""BridgeData V2 as published (RLDS, a TFDS dataset of TFRecord files), read without TensorFlow.

A TFDS RLDS dataset directory (e.g. `bridge_dataset/1.0.0/`) holds `dataset_info.json`,
`features.json` and files `<name>-<split>.tfrecord-XXXXX-of-YYYYY`. Each TFRecord record is one
episode, a serialized `tf.train.Example` whose features are the episode's `steps` flattened with
'/' (`steps/action`: float list of T * 7, `steps/is_last`: int64 list of T,
`steps/observation/image_0`: T encoded JPEG/PNG images, ...). This module reads that layout with a
small protobuf decoder and OpenCV for the images, so the training stack needs no TensorFlow (the
`bridge` extra, `pip install -e ".[bridge]"`, brings OpenCV). `write_episodes` writes the same
layout (tests use it). Episodes of fewer than 2 steps are skipped with a warning: the published
data has a few, and they hold no transition to learn from.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from mqe_client.images import preprocess_images
from mqe_model.data.dataset import Dataset, DatasetError, concatenate

logger = logging.getLogger(__name__)

ACTION_KEY = "steps/action"
LAST_KEY = "steps/is_last"
IMAGE_KEY = "steps/observation/image_0"  # BridgeData V2's fixed over-the-shoulder camera

# ----------------------------------------------------------------------------- TFRecord framing


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def _masked_crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(path: Path) -> Iterator[bytes]:
    """The records of a TFRecord file (uint64 length, its masked CRC, data, data CRC)."""
    with open(path, "rb") as f:
        while header := f.read(12):
            if len(header) < 12:
                raise DatasetError(f"{path}: truncated TFRecord header; re-download the file")
            (length,) = struct.unpack("<Q", header[:8])
            if struct.unpack("<I", header[8:])[0] != _masked_crc32c(header[:8]):
                raise DatasetError(f"{path}: corrupt TFRecord length (CRC mismatch); re-download")
            data = f.read(length)
            if len(data) < length or len(f.read(4)) < 4:
                raise DatasetError(f"{path}: truncated TFRecord; re-download the file")
            yield data


def write_records(path: Path, records: list[bytes]) -> None:
    """Write records as a TFRecord file."""
    with open(path, "wb") as f:
        for data in records:
            header = struct.pack("<Q", len(data))
            f.write(header + struct.pack("<I", _masked_crc32c(header)))
            f.write(data + struct.pack("<I", _masked_crc32c(data)))


# ----------------------------------------------------------------------------- tf.train.Example


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, bytes | int]]:
    """(field number, wire type, value) of a protobuf message (varint and length-delimited only)."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def parse_example(buf: bytes) -> dict[str, list[bytes] | np.ndarray]:
    """A serialized tf.train.Example as {name: list of bytes | float32 array | int64 array}."""
    out: dict[str, list[bytes] | np.ndarray] = {}
    for _, _, features in _fields(buf):  # Example.features = 1
        for _, _, entry in _fields(features):  # Features.feature = 1 (map entries)
            name, feature = "", b""
            for number, _, value in _fields(entry):
                if number == 1:
                    name = value.decode()
                else:
                    feature = value
            for kind, _, values in _fields(feature):  # 1 bytes, 2 float, 3 int64
                if kind == 1:
                    out[name] = [v for _, _, v in _fields(values)]
                elif kind == 2:
                    packed = b"".join(v for _, _, v in _fields(values))  # packed or not
                    out[name] = np.frombuffer(packed, "<f4").copy()
                else:
                    ints = []
                    for _, wire, v in _fields(values):
                        if wire == 2:  # packed
                            pos = 0
                            while pos < len(v):
                                x, pos = _varint(v, pos)
                                ints.append(x)
                        else:
                            ints.append(v)
                    arr = np.array(ints, np.uint64).astype(np.int64)
                    out[name] = arr
            out.setdefault(name, [])
    return out


def _len_delimited(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | 2) + _encode_varint(len(payload)) + payload


def encode_example(features: dict[str, list[bytes] | np.ndarray]) -> bytes:
    """Serialize {name: list of bytes | float array | int array} as a tf.train.Example."""
    entries = b""
    for name, value in features.items():
        if isinstance(value, list):
            kind = _len_delimited(1, b"".join(_len_delimited(1, v) for v in value))
        elif np.issubdtype(np.asarray(value).dtype, np.floating):
            kind = _len_delimited(2, _len_delimited(1, np.asarray(value, "<f4").tobytes()))
        else:
            packed = b"".join(_encode_varint(int(v) & (2**64 - 1)) for v in np.asarray(value).ravel())
            kind = _len_delimited(3, _len_delimited(1, packed))
        entries += _len_delimited(1, _len_delimited(1, name.encode()) + _len_delimited(2, kind))
    return _len_delimited(1, entries)


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


# ----------------------------------------------------------------------------- episodes


def _decode_images(encoded: list[bytes], where: str) -> np.ndarray:
    try:
        import cv2
    except ImportError:
        raise DatasetError(f"{where}: decoding RLDS images needs OpenCV: pip install opencv-python-headless") from None
    frames = []
    for data in encoded:
        bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
        if bgr is None:
            raise DatasetError(f"{where}: an image of {IMAGE_KEY} is not a decodable JPEG/PNG")
        frames.append(bgr[..., ::-1])
    return np.stack(frames)


def _episode(features: dict, where: str, image_size: int | None) -> Dataset:
    missing = [k for k in (ACTION_KEY, LAST_KEY, IMAGE_KEY) if k not in features]
    if missing:
        raise DatasetError(f"{where}: missing feature(s) {missing}; found {sorted(features)}")
    is_last = np.asarray(features[LAST_KEY]).astype(bool)
    length = len(is_last)
    images = _decode_images(features[IMAGE_KEY], where)
    if image_size:
        images = preprocess_images(images, image_size, image_size)
    actions = np.asarray(features[ACTION_KEY], np.float32)
    if length == 0 or actions.size % length:
        raise DatasetError(f"{where}: {actions.size} action values for {length} steps")
    terminals = np.zeros(length, bool)
    terminals[-1] = True  # one record is one episode, whatever is_last says mid-way
    return Dataset(images, actions.reshape(length, -1), terminals, source=where)


def write_episodes(path: Path, episodes: list[dict[str, np.ndarray]]) -> None:
    """Write episodes ({"images": (T, H, W, 3) uint8, "actions": (T, A)}) as one RLDS TFRecord file."""
    import cv2

    records = []
    for ep in episodes:
        length = len(ep["actions"])
        first, last = np.zeros(length, np.int64), np.zeros(length, np.int64)
        first[0], last[-1] = 1, 1
        records.append(encode_example({
            ACTION_KEY: np.asarray(ep["actions"], np.float32).ravel(),
            "steps/is_first": first, LAST_KEY: last, "steps/is_terminal": last,
            IMAGE_KEY: [cv2.imencode(".png", im[..., ::-1])[1].tobytes() for im in ep["images"]],
        }))
    write_records(path, records)


def load_rlds(root: Path, split: str = "train", image_size: int | None = None) -> Dataset:
    """All episodes of `split` in an RLDS/TFDS directory; images resized to `image_size` on load."""
    files = sorted(root.glob(f"*-{split}.tfrecord*"))
    if not files:
        raise DatasetError(f"{root}: no *-{split}.tfrecord* files; point --data at the TFDS version "
                           "directory, e.g. bridge_dataset/1.0.0")
    parts = []
    for path in files:
        for i, record in enumerate(read_records(path)):
            where = f"{path} episode {i}"
            try:
                features = parse_example(record)
            except (IndexError, ValueError, UnicodeDecodeError) as e:
                raise DatasetError(f"{where}: not a tf.train.Example ({e})") from None
            if len(features.get(LAST_KEY, [])) < 2:
                logger.warning("%s: skipping an episode of %d step(s)", where, len(features.get(LAST_KEY, [])))
                continue
            parts.append(_episode(features, where, image_size))
    logger.info("read %d episodes from %d file(s) in %s", len(parts), len(files), root)
    return concatenate(parts, str(root))
