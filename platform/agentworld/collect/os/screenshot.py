"""A PNG of the virtual screen, from the frame buffer Xvfb keeps in a file (``-fbdir``,
an XWD image): no X round trip, no imaging package. Standard library only (it runs
inside the sandbox, in the driver)."""

from __future__ import annotations

import struct
import zlib

_HEADER = struct.Struct(">25I")


def xwd_to_png(data: bytes) -> bytes:
    """A 24/32-bit TrueColor XWD image (what Xvfb writes) as PNG bytes."""
    fields = _HEADER.unpack_from(data)
    header_size, width, height = fields[0], fields[4], fields[5]
    byte_order, bits_per_pixel, stride = fields[7], fields[11], fields[12]
    masks, ncolors = fields[14:17], fields[19]
    if bits_per_pixel != 32:
        raise ValueError(f"unsupported XWD image: {bits_per_pixel} bits per pixel")
    start = header_size + 12 * ncolors
    pixels = data[start : start + stride * height]
    rgb = bytearray(width * height * 3)
    packed = b"".join(pixels[y * stride : y * stride + width * 4] for y in range(height))
    for channel, mask in enumerate(masks):
        shift = mask.bit_length() - 8
        byte = shift // 8 if byte_order == 0 else 3 - shift // 8
        rgb[channel::3] = packed[byte::4]
    rows = b"".join(
        b"\x00" + bytes(rgb[y * width * 3 : (y + 1) * width * 3]) for y in range(height)
    )
    return _png(width, height, zlib.compress(rows, 6))


def _png(width: int, height: int, idat: bytes) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")
