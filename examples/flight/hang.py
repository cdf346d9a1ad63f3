"""A loop that stops making progress for 3 s at step 5: ``python hang.py OUT``."""

import queue
import sys
import threading
import time

import openmsprof


def producer(q: "queue.Queue[int]") -> None:
    for i in range(100):
        time.sleep(3.0 if i == 5 else 0.02)  # the producer stalls once
        q.put(i)


def wait_for_batch(q: "queue.Queue[int]") -> int:
    return q.get()


def main(out: str) -> None:
    q: queue.Queue[int] = queue.Queue()
    threading.Thread(target=producer, args=(q,), name="producer", daemon=True).start()
    with openmsprof.flight_recorder(out, hang_s=1.0) as fr:
        for _step in range(10):
            wait_for_batch(q)
            fr.step()


if __name__ == "__main__":
    main(sys.argv[1])
