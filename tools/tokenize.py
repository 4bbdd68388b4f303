#!/usr/bin/env python3
"""Turns text into a token file for hettrain's data.kind = "tokens".

    tools/tokenize.py input.txt train.bin [--val val.bin --val-fraction 0.1]
                      [--encoding gpt2] [--format raw|llmc]

Encodes with tiktoken (pip install tiktoken: GPT-2's BPE is "gpt2", vocabulary 50257; tiktoken
fetches the BPE tables from the network on first use, or from TIKTOKEN_CACHE_DIR) and
writes little-endian uint16 ids: nanoGPT's raw format (default) or an llm.c shard (a header
of 256 int32: 20240520, 1, the token count; then the ids). hettrain itself has no tokenizer;
this script is not needed by its tests.
"""
import argparse
import struct
import sys


def write(path, ids, fmt):
    with open(path, "wb") as f:
        if fmt == "llmc":
            f.write(struct.pack("<256i", 20240520, 1, len(ids), *([0] * 253)))
        f.write(struct.pack("<%dH" % len(ids), *ids))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--val", help="also write the last --val-fraction of the ids here")
    ap.add_argument("--val-fraction", type=float, default=0.1)
    ap.add_argument("--encoding", default="gpt2", help="a tiktoken encoding (default gpt2)")
    ap.add_argument("--format", choices=["raw", "llmc"], default="raw")
    a = ap.parse_args()
    try:
        import tiktoken
    except ImportError:
        sys.exit("tools/tokenize.py: tiktoken is not installed (pip install tiktoken)")
    enc = tiktoken.get_encoding(a.encoding)
    if enc.n_vocab > 65536:
        sys.exit("tools/tokenize.py: %s has %d ids, more than uint16 holds" % (a.encoding, enc.n_vocab))
    with open(a.input, encoding="utf-8") as f:
        ids = enc.encode_ordinary(f.read())
    if a.val:
        if not 0 < a.val_fraction < 1:
            sys.exit("tools/tokenize.py: --val-fraction must be in (0, 1)")
        cut = len(ids) - int(len(ids) * a.val_fraction)
        write(a.val, ids[cut:], a.format)
        ids = ids[:cut]
    write(a.output, ids, a.format)
    print("%s: %d tokens (vocabulary %d: set model.vocab = %d)" % (a.output, len(ids), enc.n_vocab, enc.n_vocab))


if __name__ == "__main__":
    main()
