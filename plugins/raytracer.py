"""raytracer WIDTH HEIGHT [OUT.png]: render a built-in scene; the result is sha256 of the pixels.

The image is split into four quadrants recursively until a tile has at most TILE_PIXELS
pixels; a leaf renders its tile (Whitted-style: diffuse and specular light, shadows, mirror
reflections up to MAX_BOUNCES), a parent pastes its children's tiles together. The run's raw
result is the RGB bytes of the whole image; the report is their sha256 and, with OUT.png, the
picture written as a PNG where the result is delivered.

Only +, -, *, / and sqrt touch floating point (all correctly rounded in IEEE 754), so every
peer computes the same bytes for the same pixel.
"""

from __future__ import annotations

import hashlib
import math
import struct
import zlib
from collections.abc import Sequence

from satind import NotChecked, Plugin, UsageError, output_file, spawnable, sync

from ._args import int_arg

TILE_PIXELS = 1024
MAX_BOUNCES = 3
# Pixels up to which the check renders the image again in one piece and compares every byte
# (640 x 480: a few seconds of pure Python); a larger image is not checked.
CHECK_PIXELS = 640 * 480

Vec = tuple[float, float, float]
# Spheres: (centre, radius, colour, reflectivity)
SPHERES: tuple[tuple[Vec, float, Vec, float], ...] = (
    ((0.0, 1.0, 5.0), 1.0, (0.9, 0.2, 0.2), 0.3),
    ((-2.2, 0.7, 6.0), 0.7, (0.2, 0.9, 0.3), 0.1),
    ((2.0, 0.6, 4.2), 0.6, (0.2, 0.4, 0.95), 0.6),
    ((0.7, 0.3, 3.2), 0.3, (0.95, 0.85, 0.2), 0.0),
    ((-0.9, 2.4, 7.5), 0.9, (0.85, 0.85, 0.85), 0.8),
)
LIGHTS: tuple[tuple[Vec, float], ...] = (((-4.0, 6.0, 0.0), 0.8), ((5.0, 8.0, 3.0), 0.5))
AMBIENT = 0.12
EYE: Vec = (0.0, 1.2, -1.5)


def _sub(a: Vec, b: Vec) -> Vec:
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def _dot(a: Vec, b: Vec) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _norm(a: Vec) -> Vec:
    length = math.sqrt(_dot(a, a))
    return (a[0] / length, a[1] / length, a[2] / length)


def _hit(origin: Vec, direction: Vec) -> tuple[float, int]:
    """Nearest intersection: (distance, object index); index -1 is the floor, -2 nothing."""
    best, which = 1e30, -2
    for i, (centre, radius, _, _) in enumerate(SPHERES):
        oc = _sub(origin, centre)
        b = _dot(oc, direction)
        c = _dot(oc, oc) - radius * radius
        disc = b * b - c
        if disc > 0:
            t = -b - math.sqrt(disc)
            if 1e-6 < t < best:
                best, which = t, i
    if direction[1] < -1e-9:
        t = -origin[1] / direction[1]
        if 1e-6 < t < best:
            best, which = t, -1
    return best, which


def trace(origin: Vec, direction: Vec, depth: int) -> Vec:
    """Colour seen along a ray."""
    t, which = _hit(origin, direction)
    if which == -2:
        sky = 0.5 + 0.5 * direction[1]
        return (0.35 * sky, 0.55 * sky, 0.9 * sky)
    point = (
        origin[0] + t * direction[0],
        origin[1] + t * direction[1],
        origin[2] + t * direction[2],
    )
    if which == -1:
        normal: Vec = (0.0, 1.0, 0.0)
        check = (math.floor(point[0]) + math.floor(point[2])) & 1
        colour: Vec = (0.8, 0.8, 0.8) if check else (0.25, 0.25, 0.3)
        reflect = 0.15
    else:
        centre, _, colour, reflect = SPHERES[which]
        normal = _norm(_sub(point, centre))
    light = AMBIENT
    spec = 0.0
    for position, strength in LIGHTS:
        to_light = _sub(position, point)
        distance = math.sqrt(_dot(to_light, to_light))
        to_light = (to_light[0] / distance, to_light[1] / distance, to_light[2] / distance)
        lambert = _dot(normal, to_light)
        if lambert <= 0:
            continue
        shadow_t, _ = _hit(point, to_light)
        if shadow_t < distance:
            continue
        light += strength * lambert
        half = _norm(_sub(to_light, direction))
        h = _dot(normal, half)
        if h > 0:
            h2 = h * h
            h4 = h2 * h2
            h8 = h4 * h4
            spec += strength * h8 * h8 * h8 * h8  # h**32, by multiplications only
    result = (colour[0] * light + spec, colour[1] * light + spec, colour[2] * light + spec)
    if reflect > 0 and depth < MAX_BOUNCES:
        d = _dot(direction, normal)
        bounce = (
            direction[0] - 2 * d * normal[0],
            direction[1] - 2 * d * normal[1],
            direction[2] - 2 * d * normal[2],
        )
        mirrored = trace(point, bounce, depth + 1)
        keep = 1 - reflect
        result = (
            keep * result[0] + reflect * mirrored[0],
            keep * result[1] + reflect * mirrored[1],
            keep * result[2] + reflect * mirrored[2],
        )
    return result


def _byte(x: float) -> int:
    return 255 if x >= 1 else 0 if x <= 0 else int(x * 255 + 0.5)


def pixel(x: int, y: int, width: int, height: int) -> bytes:
    """The RGB bytes of one pixel."""
    scale = 2.0 / height
    dx = (x + 0.5 - width / 2) * scale
    dy = (height / 2 - y - 0.5) * scale
    colour = trace(EYE, _norm((dx, dy, 1.6)), 0)
    return bytes((_byte(colour[0]), _byte(colour[1]), _byte(colour[2])))


def render_tile(width: int, height: int, x0: int, y0: int, w: int, h: int) -> bytes:
    """Row-major RGB bytes of the tile at (x0, y0) of size w x h."""
    return b"".join(
        pixel(x, y, width, height) for y in range(y0, y0 + h) for x in range(x0, x0 + w)
    )


def quadrants(x0: int, y0: int, w: int, h: int) -> list[tuple[int, int, int, int]] | None:
    """The tiles a region splits into, or None for a leaf tile (rendered in one job)."""
    if w * h <= TILE_PIXELS or (w < 2 and h < 2):
        return None
    hw, hh = w // 2, h // 2
    quads = [
        (x0, y0, hw, hh),
        (x0 + hw, y0, w - hw, hh),
        (x0, y0 + hh, hw, h - hh),
        (x0 + hw, y0 + hh, w - hw, h - hh),
    ]
    return [q for q in quads if q[2] > 0 and q[3] > 0]


@spawnable
def render(width: int, height: int, x0: int, y0: int, w: int, h: int) -> bytes:
    quads = quadrants(x0, y0, w, h)
    if quads is None:
        return render_tile(width, height, x0, y0, w, h)
    handles = [render.spawn(width, height, *q) for q in quads]
    sync()
    return paste(
        [(q, handle.result()) for q, handle in zip(quads, handles, strict=True)], x0, y0, w, h
    )


def paste(
    tiles: list[tuple[tuple[int, int, int, int], bytes]], x0: int, y0: int, w: int, h: int
) -> bytes:
    """Assemble tiles (each (x, y, w, h) and its row-major bytes) into one region."""
    out = bytearray(w * h * 3)
    for (tx, ty, tw, th), data in tiles:
        for row in range(th):
            start = ((ty - y0 + row) * w + (tx - x0)) * 3
            out[start : start + tw * 3] = data[row * tw * 3 : (row + 1) * tw * 3]
    return bytes(out)


def png(width: int, height: int, rgb: bytes) -> bytes:
    """An 8-bit RGB PNG, without dependencies."""
    raw = b"".join(b"\x00" + rgb[y * width * 3 : (y + 1) * width * 3] for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw, 6))
        + chunk(b"IEND", b"")
    )


def parse(argv: Sequence[str]) -> tuple[int, int, int, int, int, int]:
    if len(argv) > 3:
        raise UsageError(f"too many arguments: {' '.join(argv[3:])}")
    width = int_arg(argv, 0, "WIDTH", low=1, high=8192)
    height = int_arg(argv, 1, "HEIGHT", low=1, high=8192)
    if len(argv) == 3 and not argv[2].lower().endswith(".png"):
        raise UsageError(f"OUT must be a .png file name, got {argv[2]!r}")
    return width, height, 0, 0, width, height


def report(argv: Sequence[str], result: bytes) -> str:
    if len(argv) == 3:
        width, height = int(argv[0]), int(argv[1])
        output_file(argv[2], png(width, height, result))  # written where the submitter is
    return hashlib.sha256(result).hexdigest()


def check(args: tuple[int, ...], result: bytes) -> None:
    """The image rendered again sequentially, in one tile: the same bytes, or a tile was lost,
    misplaced or computed wrong somewhere."""
    width, height = args[0], args[1]
    if len(result) != width * height * 3:
        raise AssertionError(f"image has {len(result)} bytes, expected {width * height * 3}")
    if width * height > CHECK_PIXELS:
        raise NotChecked(
            f"{width} x {height}: the check renders the image again up to {CHECK_PIXELS:,} "
            "pixels (its size is right)"
        )
    expected = render_tile(width, height, 0, 0, width, height)
    if result != expected:
        bad = next(i for i, (a, b) in enumerate(zip(result, expected, strict=True)) if a != b)
        pixel = bad // 3
        raise AssertionError(
            f"pixel ({pixel % width}, {pixel // width}) differs from a sequential render"
        )


def benchmark() -> None:
    """One small tile of the scene (16x16 pixels: ~3 ms), for self-adaptivity's speed."""
    render_tile(64, 64, 24, 24, 16, 16)


PLUGIN = Plugin(
    name="raytracer",
    entry=render,
    usage="raytracer WIDTH HEIGHT [OUT.png]",
    parse=parse,
    max_branching=4,
    check=check,
    report=report,
    description="render a scene in tiles; result = sha256 of the pixels",
    benchmark=benchmark,
)
