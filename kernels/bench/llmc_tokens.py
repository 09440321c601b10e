"""Writes a synthetic token shard in llm.c's data format, so that its
train_gpt2cu can train from random init with no dataset: a header of 256
little-endian int32 (magic 20240520, version 1, token count, then zeros)
followed by the tokens as uint16 (uniform over GPT-2's 50257-token vocabulary).
llm.c's loader needs at least B*T+1 tokens per shard.

usage: llmc_tokens.py PATH NTOKENS [SEED]
"""
import random
import struct
import sys
from array import array

MAGIC, VERSION, HEADER_INTS, VOCAB = 20240520, 1, 256, 50257


def write_shard(path, ntokens, seed=0):
    rng = random.Random(seed)
    tokens = array("H", (rng.randrange(VOCAB) for _ in range(ntokens)))
    if sys.byteorder != "little":
        tokens.byteswap()
    header = struct.pack(f"<{HEADER_INTS}i", MAGIC, VERSION, ntokens, *([0] * (HEADER_INTS - 3)))
    with open(path, "wb") as f:
        f.write(header)
        f.write(tokens.tobytes())


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    write_shard(argv[1], int(argv[2]), int(argv[3]) if len(argv) == 4 else 0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
