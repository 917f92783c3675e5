"""Fails unless a PNG shows something: decodes it with the standard library only (zlib and
the PNG filters, 8-bit RGB/RGBA/grey) and requires several distinct colours and a share of
non-background pixels. Usage: python3 png_variety.py FILE.png [MIN_COLOURS] [MIN_INK_SHARE]"""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"FAIL: {path} is not a PNG")
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or interlace != 0 or colour not in (0, 2, 6):
                raise SystemExit(f"FAIL: unsupported PNG (depth {depth}, colour {colour})")
            bpp = {0: 1, 2: 3, 6: 4}[colour]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def main():
    path = sys.argv[1]
    min_colours = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    min_ink = float(sys.argv[3]) if len(sys.argv) > 3 else 0.01
    width, height, bpp, rows = decode(path)
    colours, ink, total = {}, 0, 0
    for row in rows[::2]:  # every other row is plenty
        for x in range(0, width * bpp, bpp * 2):
            px = row[x:x + 3] if bpp >= 3 else row[x:x + 1] * 3
            colours[px] = colours.get(px, 0) + 1
            total += 1
    background = max(colours, key=colours.get)
    ink = total - colours[background]
    share = ink / total
    print(f"{path}: {width}x{height}, {len(colours)} colours, {share:.1%} not background")
    if len(colours) < min_colours or share < min_ink:
        print(f"FAIL: blank-looking picture (need >= {min_colours} colours, >= {min_ink:.0%} ink)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
