#!/usr/bin/env python3
"""Writes a source directory for `datavo pack`: one `<id>.audio.wav` and one `<id>.transcript.txt` per sample.

    gen_samples.py OUT_DIR --samples N [--wav-bytes B] [--txt-bytes T] [--seed S]

audio.wav is a 44-byte RIFF/WAVE header (16 kHz mono 16-bit PCM) followed by B - 44 bytes of pseudo-random PCM
(incompressible, so no layer can win by compression or deduplication); transcript.txt is T bytes of ASCII text.
Ids are utt_000000, utt_000001, ... Random bytes come from one seeded generator (random.Random.randbytes), so two
runs with the same arguments write the same files.
"""
import argparse
import os
import random
import struct


def wav_header(data_bytes: int) -> bytes:
    rate = 16000
    return (b"RIFF" + struct.pack("<I", 36 + data_bytes) + b"WAVEfmt " +
            struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16) + b"data" + struct.pack("<I", data_bytes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--samples", type=int, required=True)
    parser.add_argument("--wav-bytes", type=int, default=64 * 1024)
    parser.add_argument("--txt-bytes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.wav_bytes < 44:
        parser.error("--wav-bytes must be at least 44 (the WAV header)")
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(args.seed)
    words = [b"the", b"speaker", b"said", b"a", b"synthetic", b"utterance", b"number", b"with", b"noise"]
    pcm = args.wav_bytes - 44
    for i in range(args.samples):
        sid = f"utt_{i:06d}"
        with open(os.path.join(args.out, sid + ".audio.wav"), "wb") as f:
            f.write(wav_header(pcm))
            # In pieces of at most 64 MiB, so a 1 GiB sample does not need 1 GiB of Python memory.
            left = pcm
            while left:
                n = min(left, 64 << 20)
                f.write(rng.randbytes(n))
                left -= n
        text = f"{sid}: ".encode()
        while len(text) < args.txt_bytes:
            text += rng.choice(words) + b" "
        text = text[: args.txt_bytes - 1] + b"\n" if args.txt_bytes else b""
        with open(os.path.join(args.out, sid + ".transcript.txt"), "wb") as f:
            f.write(text)


if __name__ == "__main__":
    main()
