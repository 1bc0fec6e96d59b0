"""Names of runtime helpers the generated modules import (one place to rename them)."""

CHECKSUM_FUNCS = {"crc32": "_ck_crc32", "crc32c": "_ck_crc32c", "xxh3_64": "_ck_xxh3_64",
                  "blake3": "_ck_blake3"}
