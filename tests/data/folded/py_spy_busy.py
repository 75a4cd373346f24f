"""A small CPU-bound program for py-spy to sample: busy_loop dominates."""
import math
import time


def busy_loop(n):
    x = 0.0
    for i in range(n):
        x += math.sqrt(i) * math.sin(i)
    return x


def light_work(n):
    return sum((i * 7) % 13 for i in range(n))


def main(seconds):
    end = time.monotonic() + seconds
    sink = 0.0
    while time.monotonic() < end:
        sink += busy_loop(100_000)
        sink += light_work(10_000)
    return sink


if __name__ == "__main__":
    main(0.5)
