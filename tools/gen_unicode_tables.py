#!/usr/bin/env python3
"""Generates src/tok/unicode_tables.c: the Unicode data the tokenizer (src/tok/) needs, as
sorted ranges and pairs, from Python's `unicodedata` (no download), or from the
`unicodedata2` package (the same module for a newer Unicode) when it is installed.

    python3 -m venv /tmp/uvenv && /tmp/uvenv/bin/pip install unicodedata2==16.0.0
    /tmp/uvenv/bin/python tools/gen_unicode_tables.py [OUT=src/tok/unicode_tables.c]

Use the Unicode version of the `tokenizers` the ids are compared with: tokenizers 0.23's
regular expressions (Oniguruma) know Unicode 16.0, so the committed tables are 16.0
(unicodedata2 16.0.0); Python 3.11's own unicodedata is 14.0, which would put the letters
and digits added in 15.0 and 16.0 (CJK extensions H and I, Kawi, Garay, ...) outside
\\p{L} and \\p{N}.

Tables (all sorted by their first column; looked up by binary search):
  lc_uc_cat       {lo, hi, bits}: 1 = letter (general category L*, regex \\p{L}), 2 = number
                  (N*, \\p{N}), 8 = a word character of Rust's regex \\w (Alphabetic, M*,
                  Nd, Nl, Pc, Join_Control: what tokenizers' single_word looks at);
                  code points not listed have none.
  lc_uc_ccc       {lo, hi, ccc}: canonical combining class, the non-zero ones.
  lc_uc_decomp    {cp, a, b}: canonical decomposition of cp into a (and b, 0 if none),
                  one step (decompose recursively); Hangul syllables are algorithmic.
  lc_uc_comp      {a, b, composite}: the primary composites (canonical pairs whose
                  composite is not excluded from composition), sorted by (a, b).
  lc_uc_nfc_maybe {lo, hi}: every code point that may change under NFC or make its
                  neighbour change (ccc != 0, NFC(c) != c, the second of a composable pair,
                  Hangul V/T jamo). Text with none of them is already in NFC.
White_Space (regex \\s) is a fixed list of 25 code points, written in src/tok/unicode.c.
The Unicode version is Python's (unicodedata.unidata_version), recorded in the output.
"""
import sys

try:
    import unicodedata2 as ud
except ImportError:
    import unicodedata as ud

MAXCP = 0x110000


def ranges(pred):
    """[(lo, hi, value)] of maximal runs where pred(cp) is the same non-zero value."""
    out, cur = [], None
    for cp in range(MAXCP):
        v = pred(cp)
        if v and cur and cur[2] == v and cur[1] == cp - 1:
            cur[1] = cp
        elif v:
            cur = [cp, cp, v]
            out.append(cur)
        else:
            cur = None
    return [tuple(r) for r in out]


# Alphabetic code points outside L*, M* and Nl (Other_Alphabetic symbols, PropList.txt;
# unicodedata has no property lookups): the circled, squared and negative Latin letters.
OTHER_ALPHABETIC_SYMBOLS = [(0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189)]


def cat_class(cp):
    c = ud.category(chr(cp))
    bits = 1 if c[0] == "L" else 2 if c[0] == "N" else 0
    if (c[0] in "LM" or c in ("Nd", "Nl", "Pc") or cp in (0x200C, 0x200D) or
            any(lo <= cp <= hi for lo, hi in OTHER_ALPHABETIC_SYMBOLS)):
        bits |= 8
    return bits


def is_hangul_syllable(cp):
    return 0xAC00 <= cp <= 0xD7A3


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else "src/tok/unicode_tables.c"
    cat = ranges(cat_class)
    ccc = ranges(lambda cp: ud.combining(chr(cp)))
    decomp, comp = [], []
    for cp in range(MAXCP):
        if is_hangul_syllable(cp):
            continue
        d = ud.decomposition(chr(cp))
        if not d or d.startswith("<"):
            continue
        parts = [int(x, 16) for x in d.split()]
        assert 1 <= len(parts) <= 2, (hex(cp), d)
        decomp.append((cp, parts[0], parts[1] if len(parts) == 2 else 0))
        # A primary composite: a pair that NFC recomposes into cp.
        if len(parts) == 2 and ud.normalize("NFC", chr(cp)) == chr(cp):
            comp.append((parts[0], parts[1], cp))
    comp.sort()
    seconds = {b for _, b, _ in comp}

    def maybe(cp):
        ch = chr(cp)
        if 0xD800 <= cp <= 0xDFFF:
            return 0
        if ud.combining(ch) or cp in seconds or 0x1161 <= cp <= 0x1175 or 0x11A8 <= cp <= 0x11C2:
            return 1
        return 1 if ud.normalize("NFC", ch) != ch else 0

    nfc_maybe = ranges(maybe)
    # Checks of the claims above.
    maybe_set = set()
    for lo, hi, _ in nfc_maybe:
        maybe_set.update(range(lo, hi + 1))
    assert min(maybe_set) >= 0x300  # unicode.c skips everything below U+0300
    for a, b, c in comp:
        assert b in maybe_set and ud.normalize("NFC", chr(a) + chr(b)) == chr(c)
    for cp in range(0, MAXCP, 7):
        if cp not in maybe_set and not 0xD800 <= cp <= 0xDFFF:
            assert ud.normalize("NFC", chr(cp)) == chr(cp)

    def table(name, rows, cols):
        lines = [f"const uint32_t {name}[][{cols}] = {{"]
        line = " "
        for r in rows:
            cell = " {" + ", ".join(f"0x{x:X}" for x in r) + "},"
            if len(line) + len(cell) > 96:
                lines.append(line)
                line = " "
            line += cell
        lines.append(line)
        lines.append("};")
        lines.append(f"const size_t {name}_n = sizeof {name} / sizeof {name}[0];")
        return "\n".join(lines) + "\n"

    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        f.write(f"// Generated by tools/gen_unicode_tables.py from {ud.__name__} (Python {sys.version.split()[0]})\n")
        f.write(f"// (Unicode {ud.unidata_version}). Do not edit: run the script again.\n")
        f.write('#include "tok/unicode_tables.h"\n\n')
        f.write(f'const char lc_uc_version[] = "{ud.unidata_version}";\n\n')
        f.write("// {lo, hi, bits}: 1 letter (L*), 2 number (N*), 8 word character (regex backslash-w).\n")
        f.write(table("lc_uc_cat", cat, 3) + "\n")
        f.write("// {lo, hi, canonical combining class} for the non-zero classes.\n")
        f.write(table("lc_uc_ccc", ccc, 3) + "\n")
        f.write("// {cp, a, b}: cp decomposes canonically into a b (b = 0: into a alone).\n")
        f.write(table("lc_uc_decomp", decomp, 3) + "\n")
        f.write("// {a, b, composite}: the primary composites, sorted by (a, b).\n")
        f.write(table("lc_uc_comp", comp, 3) + "\n")
        f.write("// {lo, hi}: code points that may change under NFC or change their neighbours.\n")
        f.write(table("lc_uc_nfc_maybe", [(lo, hi) for lo, hi, _ in nfc_maybe], 2))
    print(f"{out_path}: {len(cat)} category ranges, {len(ccc)} ccc ranges, {len(decomp)} decompositions, "
          f"{len(comp)} compositions, {len(nfc_maybe)} NFC-maybe ranges (Unicode {ud.unidata_version})")


if __name__ == "__main__":
    main()
