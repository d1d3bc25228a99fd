"""The reference engine with a host-side stall: 50 ms every 32 steps after a setup (stall=True)."""
import time

from guard.engine import RefEngine


class Stalling(RefEngine):
    def setup(self, batch_size):
        super().setup(batch_size)
        self.calls = 0

    def step(self, tokens=None):
        self.calls += 1
        if self.stall and self.calls % 32 == 0:
            time.sleep(0.05)
        return super().step(tokens)


def make(stall=True, **options):
    engine = Stalling(**options)
    engine.stall = stall
    return engine
