#!/usr/bin/env python3
"""RESP `SET` commands for redis-benchmark's key names, on stdout for `redis-cli --pipe`.

redis-benchmark's `GET usr:__rand_int__ -r N` asks for usr:000000000000 .. usr:<N-1>, the id
zero-padded to 12 digits; loadgen asks for usr:1 .. usr:N. So that both read rows that exist,
of the same size, this stores the row of id i (as `loadgen prepare` does) under the padded key.

  redis-benchmark-keys.py N | redis-cli ... -n DB --pipe
"""
import sys
from datetime import datetime, timedelta, timezone

BASE = datetime(2010, 2, 3, 11, 22, 33, tzinfo=timezone.utc)


def main():
    n = int(sys.argv[1])
    out = sys.stdout.buffer
    chunk = []
    for i in range(n):
        key = b"usr:%012d" % i
        created = (BASE + timedelta(seconds=i)).strftime("%Y-%m-%d %H:%M:%S").encode()
        row = b"user%d\tuser%d@example.com\t%s" % (i, i, created)
        chunk.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(row), row))
        if len(chunk) >= 10000:
            out.write(b"".join(chunk))
            chunk.clear()
    out.write(b"".join(chunk))


main()
